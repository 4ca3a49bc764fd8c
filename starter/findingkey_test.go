package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/infra/config"
)

// An installation whose database holds the findings' key (an earlier
// release kept it there) exports it to a file, as version 1, so the
// workers hash as before; forget takes it out of the database only when
// given that same key (or --discard), and nothing prints the key.
func TestFindingKeyExportAndForget(t *testing.T) {
	ctx := context.Background()
	legacy := []byte("the-key-an-earlier-release-kept-0123")
	if _, err := env.Store.Pool().Exec(ctx, `INSERT INTO settings (name, value) VALUES ('finding_hash_key', $1)
		ON CONFLICT (name) DO UPDATE SET value = excluded.value`, legacy); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	exported, other := filepath.Join(dir, "finding.key"), filepath.Join(dir, "other.key")

	out, errOut, code := starter(t, "admin", "finding-key", "export", "--out", exported)
	if code != 0 || !strings.Contains(out, config.EnvHashKeyFile) {
		t.Fatalf("export: exit %d\n%s%s", code, out, errOut)
	}
	k, err := config.ReadFindingKeyFile(exported)
	if err != nil || k.Version != 1 || string(k.Secret) != string(legacy) {
		t.Fatalf("exported key: %v %v", k, err)
	}
	if fi, err := os.Stat(exported); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("key file mode: %v %v", fi.Mode(), err)
	}
	if _, _, code := starter(t, "admin", "finding-key", "export", "--out", exported); code == 0 {
		t.Error("export overwrote an existing file")
	}

	if out, errOut, code := starter(t, "admin", "finding-key", "new", "--version", "2", "--out", other); code != 0 {
		t.Fatalf("new: exit %d\n%s%s", code, out, errOut)
	}
	if k2, err := config.ReadFindingKeyFile(other); err != nil || k2.Version != 2 || string(k2.Secret) == string(legacy) {
		t.Fatalf("new key: %v %v", k2, err)
	}
	if _, errOut, code := starter(t, "admin", "finding-key", "forget", "--key-file", other); code == 0 || !strings.Contains(errOut, "export it first") {
		t.Fatalf("forget with another key: exit %d %s", code, errOut)
	}
	if _, held, _ := env.Store.LegacyFindingKey(ctx); !held {
		t.Fatal("forgotten for another key")
	}
	out, errOut, code = starter(t, "admin", "finding-key", "forget", "--key-file", exported)
	if code != 0 || !strings.Contains(out, "no longer holds") {
		t.Fatalf("forget: exit %d\n%s%s", code, out, errOut)
	}
	if _, held, _ := env.Store.LegacyFindingKey(ctx); held {
		t.Fatal("the database still holds the key")
	}
	if _, errOut, code := starter(t, "admin", "finding-key", "export", "--out", filepath.Join(dir, "again.key")); code == 0 ||
		!strings.Contains(errOut, "holds no finding key") {
		t.Fatalf("export with nothing to export: exit %d %s", code, errOut)
	}
	for _, f := range []string{exported, other} {
		text, _ := os.ReadFile(f)
		if strings.Contains(out+errOut, strings.TrimSpace(string(text))) {
			t.Errorf("a command printed the key of %s", f)
		}
	}
}

// Repository paths are printed with the bytes a terminal would act on
// escaped: a file name that clears the screen, sets the window title or
// reverses the text reads as what it is.
func TestFindingsEscapeTerminalBytes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo.git")
	token := gittest.FakePAT("Esc")
	name := "conf\x1b[2J\x1b]0;owned\x07/app\u202eenv.sh"
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	gittest.Git(t, dir, nil, "init", "-q", "--bare", "-b", "main", dir)
	blob := strings.TrimSpace(gittest.Git(t, dir, strings.NewReader("GH="+token+"\n"), "hash-object", "-w", "--stdin"))
	gittest.Git(t, dir, nil, "update-index", "--add", "--cacheinfo", "100644,"+blob+","+name)
	tree := strings.TrimSpace(gittest.Git(t, dir, nil, "write-tree"))
	commit := strings.TrimSpace(gittest.Git(t, dir, nil, "commit-tree", tree, "-m", "escapes"))
	gittest.Git(t, dir, nil, "update-ref", "refs/heads/main", commit)
	if out, errOut, code := starter(t, "scan", dir); code != 0 {
		t.Fatalf("scan: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code := starter(t, "findings", "--occurrences", dir)
	if code != 0 || !strings.Contains(out, "github-pat") {
		t.Fatalf("findings: exit %d\n%s%s", code, out, errOut)
	}
	if strings.ContainsAny(out, "\x1b\x07\u202e") {
		t.Errorf("findings printed terminal control bytes: %q", out)
	}
	if !strings.Contains(out, `conf\x1b[2J\x1b]0;owned\x07/app\u202eenv.sh:1`) {
		t.Errorf("findings does not show the escaped path: %q", out)
	}
}
