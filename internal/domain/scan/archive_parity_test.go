package scan

import (
	"archive/tar"
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
)

// gitleaks' own test repository of archives (a tar.gz holding a tar, a
// zip, a 7z, a tar.xz, a tar.zst and gzip, xz and zstd files, and a zstd
// file beside it), scanned by `gitleaks git --max-archive-depth 8` and by
// gitfleet, both with gitleaks' configuration: the same (path, rule, line,
// secret), but for the 7z archive, which gitfleet does not open.
func TestArchivesEqualGitleaksOnItsRepository(t *testing.T) {
	src := filepath.Join(filepath.Dir(filepath.Dir(gitleaksConfig(t))), "testdata", "repos", "archives")
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
		t.Fatalf("copy gitleaks' archives repository: %v", err)
	}
	if err := os.Rename(filepath.Join(dir, "dotGit"), filepath.Join(dir, ".git")); err != nil {
		t.Fatal(err)
	}
	theirs, ours := archiveParity(t, dir)
	missing, extra := diffSorted(theirs, ours)
	var unopened []string
	for _, m := range missing {
		if strings.Contains(m, ".7z!") {
			unopened = append(unopened, m)
			continue
		}
		t.Errorf("gitleaks found, gitfleet did not: %s", m)
	}
	for _, e := range extra {
		t.Errorf("gitfleet found, gitleaks did not: %s", e)
	}
	t.Logf("gitleaks %d findings, gitfleet %d; in 7z archives, which gitfleet does not open: %d", len(theirs), len(ours), len(unopened))
	if len(theirs) != 22 || len(unopened) != 3 {
		t.Errorf("gitleaks found %d (%d in 7z), the repository holds 22 (3 in 7z)", len(theirs), len(unopened))
	}
}

// A repository with a secret in each format gitfleet opens, committed as
// gitleaks names them: both find the same, but in a jar, which gitleaks
// does not open (it goes by the name, and .jar is not one of its formats).
func TestArchivesEqualGitleaksInEveryFormat(t *testing.T) {
	g := newGen(21)
	aws := func() string { return "AKIA" + g.s(base32Chars, 16) }
	gh := func() string { return "ghp_" + g.mixed(36) }
	props := func() string { return "# service\nregion = eu-west-1\naws_access_key_id = " + aws() + "\n" }
	env := func() string { return "DEBUG=1\nGITHUB_TOKEN=" + gh() + "\n" }
	tarOf := func(es ...entry) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, e := range es {
			tw.WriteHeader(&tar.Header{Name: e.name, Mode: 0o644, Size: int64(len(e.content))})
			io.WriteString(tw, e.content)
		}
		tw.Close()
		return b.Bytes()
	}
	zipped := zipBytes(t, entry{"config/app.properties", props()},
		entry{"lib/inner.tar.gz", string(tgzBytes(t, entry{"inner/.env", env()}))})
	files := map[string][]byte{
		"dist/secrets.zip":   zipped,
		"dist/app.jar":       zipped,
		"dist/bundle.tar":    tarOf(entry{"bundle/app.properties", props()}, entry{"bundle/.env", env()}),
		"dist/bundle.tar.gz": tgzBytes(t, entry{"bundle/app.properties", props()}),
		"conf/app.env.gz":    gzBytes(t, []byte(env())),
		// bzip2(1)'s output: Go has no bzip2 writer.
		"conf/aws.ini.bz2":      unhexTest("425a683931415926535954a404990000195f800010400238022fb94250aea99ea0200048c641a7a9ea00d1e51a683d350c61313418230989a30a04e2137c802eb67cde67a645abc8f7752d23456421d47d9354a481262809b72e4007bc0702ee48a70a120a94809320"),
		"conf/app.env.zst":      zstdBytes(t, []byte(env())),
		"dist/bundle.tar.zst":   zstdBytes(t, tarOf(entry{"bundle/.env", env()})),
		"conf/app.env.xz":       xzBytes(t, []byte(env())),
		"dist/bundle.tar.xz":    xzBytes(t, tarOf(entry{"bundle/app.properties", props()})),
		"conf/app.env.sz":       snappyBytes(t, []byte(env())),
		"conf/plain.properties": []byte(props()),
	}
	dir := t.TempDir()
	for p, b := range files {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(t, dir, "init", "-q")
	git(t, dir, "add", ".")
	git(t, dir, "commit", "-q", "-m", "archives")

	theirs, ours := archiveParity(t, dir)
	var inJar []string
	for _, k := range ours {
		if after, ok := strings.CutPrefix(k, "dist/app.jar!"); ok {
			inJar = append(inJar, "dist/secrets.zip!"+after)
		}
	}
	ours = slices.DeleteFunc(ours, func(k string) bool { return strings.HasPrefix(k, "dist/app.jar!") })
	missing, extra := diffSorted(theirs, ours)
	for _, m := range missing {
		t.Errorf("gitleaks found, gitfleet did not: %s", m)
	}
	for _, e := range extra {
		t.Errorf("gitfleet found, gitleaks did not: %s", e)
	}
	if inZip := slices.DeleteFunc(slices.Clone(ours), func(k string) bool { return !strings.HasPrefix(k, "dist/secrets.zip!") }); !slices.Equal(inJar, inZip) {
		t.Errorf("in the jar %q, in the same zip %q", inJar, inZip)
	}
	// One finding per file written, 2 in the zip (its nested tar.gz's),
	// as many in the jar (which only gitfleet opens).
	if want := 2 + 2 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1; len(theirs) != want || len(inJar) != 2 {
		t.Errorf("gitleaks found %d, want %d; gitfleet found %d in the jar, want 2:\n%s", len(theirs), want, len(inJar), strings.Join(theirs, "\n"))
	}
	t.Logf("gitleaks %d findings, gitfleet %d and %d in the jar", len(theirs), len(ours), len(inJar))
}

// archiveParity runs gitleaks on the repository at dir, archives 8 deep,
// and gitfleet's scanner on every blob each commit added or changed, both
// with gitleaks' configuration and decoding as gitleaks does by default;
// it returns their findings as sorted "path:line rule secret-hash" keys.
func archiveParity(t *testing.T, dir string) (theirs, ours []string) {
	t.Helper()
	return archiveParityBy(t, dir, func(Finding) bool { return true })
}

// archiveParityBy is archiveParity with only gitfleet's findings that keep
// accepts.
func archiveParityBy(t *testing.T, dir string, keep func(Finding) bool) (theirs, ours []string) {
	t.Helper()
	cfg := gitleaksConfig(t)
	rs, err := LoadFile(cfg)
	if err != nil {
		t.Fatalf("gitleaks' configuration does not load: %v", err)
	}
	report := filepath.Join(t.TempDir(), "report.json")
	cmd := exec.Command(gitleaksBinary(t), "git", dir, "--config", cfg, "--max-archive-depth", "8", "--report-format", "json",
		"--report-path", report, "--exit-code", "0", "--no-banner", "--log-level", "error")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("gitleaks: %v\n%s", err, out)
	}
	key := func(path string, line int, rule, hash string) string {
		return fmt.Sprintf("%s:%d %s %.12s", path, line, rule, hash)
	}
	for _, l := range readGitleaksReport(t, report) {
		mac := hmac.New(sha256.New, testKey)
		mac.Write([]byte(l.Secret))
		theirs = append(theirs, key(l.File, l.secretLine(), l.RuleID, hex.EncodeToString(mac.Sum(nil))))
	}

	s := newTestScanner(t, rs)
	seen := map[string]bool{}
	for _, b := range addedBlobs(t, dir) {
		for _, f := range s.Scan(b.path, b.content, b.commit).Findings {
			if !keep(f) {
				continue
			}
			at := b.path
			if f.Archive != "" {
				at += "!" + f.Archive
			}
			if k := key(at, f.Line, f.RuleID, f.SecretHash); !seen[k] {
				seen[k] = true
				ours = append(ours, k)
			}
		}
	}
	theirs = slices.Compact(slices.Sorted(slices.Values(theirs)))
	slices.Sort(ours)
	return theirs, ours
}

type addedBlob struct {
	commit, path string
	content      []byte
}

// addedBlobs are the blobs each commit of every ref added or changed, at
// their paths, as gitleaks' git scan meets them.
func addedBlobs(t *testing.T, dir string) []addedBlob {
	t.Helper()
	var out []addedBlob
	commit := ""
	for line := range strings.SplitSeq(git(t, dir, "log", "--all", "--raw", "--no-renames", "--no-abbrev", "--format=commit %H"), "\n") {
		if c, ok := strings.CutPrefix(line, "commit "); ok {
			commit = c
			continue
		}
		meta, path, ok := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		if !ok || len(f) != 5 || !strings.HasPrefix(f[0], ":") || f[4] == "D" {
			continue
		}
		content := git(t, dir, "cat-file", "blob", f[3])
		out = append(out, addedBlob{commit: commit, path: path, content: []byte(content)})
	}
	if len(out) == 0 {
		t.Fatal("no blobs in the repository")
	}
	return out
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
		"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_NOSYSTEM=1", "HOME="+dir)
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return string(out)
}

func zstdBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	e, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	return e.EncodeAll(b, nil)
}

func xzBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w, err := xz.NewWriter(&out)
	if err != nil {
		t.Fatal(err)
	}
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func snappyBytes(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	w := s2.NewWriter(&out, s2.WriterSnappyCompat())
	w.Write(b)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func unhexTest(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}
