package main

import (
	"archive/zip"
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A secret in a file inside a committed jar is found and listed at
// jar!file:line; a zip bomb beside it is cut short, and the scan says so
// and is partial.
func TestFindingsInArchives(t *testing.T) {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
	token := "ghp_"
	for i := range 36 { // built at run time, varied enough for the rule's entropy
		token += string(alnum[i*7%len(alnum)])
	}
	zipOf := func(files ...[2]string) []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		for _, f := range files {
			w, err := zw.Create(f[0])
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte(f[1]))
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	dir := t.TempDir()
	for name, content := range map[string][]byte{
		"dist/app.jar": zipOf([2]string{"META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n"},
			[2]string{"config/application.properties", "# service\ngithub.token=" + token + "\n"}),
		"dist/bomb.zip": zipOf([2]string{"bomb.txt", strings.Repeat("a", 40<<20)}),
	} {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"add", "."}, {"commit", "-q", "-m", "add"}} {
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}

	out, errOut, code := starter(t, "scan", dir)
	if code != 0 || !strings.Contains(out, "archives  1 archive entry skipped: expansion ratio over the limit\n") {
		t.Fatalf("scan: exit %d, want the bomb's skip said\n%s%s", code, out, errOut)
	}
	// A run a bomb cut short is never complete (it was, before).
	if !strings.Contains(out, "; partial: scanning again would skip the same\n") {
		t.Errorf("scan: want the run partial\n%s", out)
	}
	out, errOut, code = starter(t, "findings", dir)
	if code != 0 || !strings.Contains(out, "dist/app.jar!config/application.properties:2") {
		t.Fatalf("findings: exit %d, want the secret at jar!file:line\n%s%s", code, out, errOut)
	}
	jsonOut, errOut, code := starter(t, "--json", "findings", dir, "--occurrences")
	var listed struct {
		Findings []struct {
			Path, Archive string
			Line          int
			Occurrences   []struct{ Path, Archive string }
		}
	}
	if err := json.Unmarshal([]byte(jsonOut), &listed); code != 0 || err != nil {
		t.Fatalf("findings --json: exit %d, %v\n%s%s", code, err, jsonOut, errOut)
	}
	if f := listed.Findings; len(f) != 1 || f[0].Path != "dist/app.jar" || f[0].Archive != "config/application.properties" || f[0].Line != 2 ||
		len(f[0].Occurrences) != 1 || f[0].Occurrences[0].Archive != "config/application.properties" {
		t.Errorf("findings --json: %+v", listed.Findings)
	}
	if strings.Contains(out+jsonOut, token) {
		t.Errorf("findings prints the secret:\n%s%s", out, jsonOut)
	}
}
