package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/infra/config"
)

// The documented outputs are checked: a fenced block right after a line
//
//	<!-- checked: FIXTURE -->
//
// in docs/starter.md or README.md holds commands ("$ starter …", optionally
// piped to "| head -N" or "| tail -N"), each followed by what it printed
// (standard output, then standard error) and "[exit N]". The test sets the
// fixture up on the test stack, runs every command as written (the dev
// stack's forge.localhost is this stack's forge), and compares the outputs
// after normalising what differs from run to run: ids, times, ages,
// hashes, commits, run ids, addresses and ports, and runs of spaces (so
// column widths do not matter). A line "…" stands for any lines. A change
// that alters an output fails here until the docs follow; the failure
// prints the block as it is now. GITFLEET_DOCS_UPDATE=1 writes the blocks
// that differ instead (this stack's forge and Web UI shown as the dev
// stack's of docs/starter.md: forge.localhost, 127.0.0.1:18233).
func TestDocumentedOutputsAreCurrent(t *testing.T) {
	blocks := docBlocks(t, "../docs/starter.md", "../README.md", "../docs/operations.md")
	if len(blocks) < 8 {
		t.Fatalf("only %d checked blocks: the markers are gone?", len(blocks))
	}
	update := os.Getenv("GITFLEET_DOCS_UPDATE") == "1"
	rewrites := map[string]map[int]docRewrite{} // file → first line → rewrite
	defer func() {
		for file, rs := range rewrites {
			writeRewrites(t, file, rs)
		}
	}()
	for _, b := range blocks {
		t.Run(fmt.Sprintf("%s:%d", filepath.Base(b.file), b.line), func(t *testing.T) {
			setUp, ok := docFixtures[b.fixture]
			if !ok {
				t.Fatalf("unknown fixture %q (known: %v)", b.fixture, fixtureNames())
			}
			de := setUp(t)
			t.Chdir(de.dir)
			var got strings.Builder
			for i, c := range b.cmds {
				out, code := runDocumented(t, c.line, de.paths)
				if i > 0 {
					got.WriteString("\n")
				}
				fmt.Fprintf(&got, "$ %s\n%s[exit %d]\n", c.line, out, code)
				if code != c.exit || !matchLines(normalizeDoc(c.want), normalizeDoc(out)) {
					t.Errorf("%s:%d: `%s` printed (exit %d):\n%s\ndocumented (exit %d):\n%s",
						b.file, b.line, c.line, code, out, c.exit, c.want)
				}
			}
			if t.Failed() && update {
				if rewrites[b.file] == nil {
					rewrites[b.file] = map[int]docRewrite{}
				}
				rewrites[b.file][b.first] = docRewrite{b.last, strings.NewReplacer(fg.Host(), "forge.localhost", "http://ui.test/", "http://127.0.0.1:18233/").Replace(got.String())}
			}
			if t.Failed() {
				t.Logf("the block as it runs now (GITFLEET_DOCS_UPDATE=1 go test ./starter -run TestDocumentedOutputsAreCurrent writes it):\n%s", got.String())
			}
		})
	}
}

// docEnv is where a block's commands run, and the paths the docs show in
// place of the fixture's (doc → real).
type docEnv struct {
	dir   string
	paths map[string]string
}

type docBlock struct {
	file, fixture string
	line          int
	first, last   int // the body's lines, 0-based, last excluded
	cmds          []docCmd
}

type docRewrite struct {
	last int
	body string
}

// writeRewrites replaces blocks' bodies in file (GITFLEET_DOCS_UPDATE).
func writeRewrites(t *testing.T, file string, rs map[int]docRewrite) {
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	var out []string
	for i := 0; i < len(lines); i++ {
		if r, ok := rs[i]; ok {
			out = append(out, strings.Split(strings.TrimSuffix(r.body, "\n"), "\n")...)
			i = r.last - 1
			continue
		}
		out = append(out, lines[i])
	}
	if err := os.WriteFile(file, []byte(strings.Join(out, "\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("rewrote %d blocks of %s", len(rs), file)
}

type docCmd struct {
	line string // after "$ "
	want string
	exit int
}

var (
	checkedMarker = regexp.MustCompile(`^<!-- checked: (\S+) -->$`)
	exitLine      = regexp.MustCompile(`^\[exit (\d+)\]$`)
)

// docBlocks reads the checked blocks of the files.
func docBlocks(t *testing.T, files ...string) []docBlock {
	t.Helper()
	var blocks []docBlock
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		for i := 0; i < len(lines); i++ {
			m := checkedMarker.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			if i+1 >= len(lines) || lines[i+1] != "```" {
				t.Fatalf("%s:%d: a checked marker must be followed by a fence", f, i+1)
			}
			b := docBlock{file: f, fixture: m[1], line: i + 1, first: i + 2}
			var cur *docCmd
			var want []string
			i += 2
			for ; i < len(lines) && lines[i] != "```"; i++ {
				l := lines[i]
				switch em := exitLine.FindStringSubmatch(l); {
				case strings.HasPrefix(l, "$ "):
					cur = &docCmd{line: strings.TrimPrefix(l, "$ ")}
					want = nil
				case cur == nil && strings.TrimSpace(l) != "":
					t.Fatalf("%s:%d: output before any command", f, i+1)
				case em != nil:
					cur.exit, _ = strconv.Atoi(em[1])
					cur.want = strings.Join(want, "\n")
					b.cmds = append(b.cmds, *cur)
					cur = nil
				case cur != nil:
					want = append(want, l)
				}
			}
			b.last = i
			if cur != nil {
				t.Fatalf("%s:%d: `%s` has no [exit N] line", f, b.line, cur.line)
			}
			if len(b.cmds) == 0 {
				t.Fatalf("%s:%d: a checked block without commands", f, b.line)
			}
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// runDocumented runs one documented command line and returns standard
// output then standard error, and the exit code.
func runDocumented(t *testing.T, line string, paths map[string]string) (string, int) {
	t.Helper()
	parts := strings.Split(line, " | ")
	words := shellWords(t, parts[0])
	if len(words) == 0 || words[0] != "starter" {
		t.Fatalf("not a starter command: %s", line)
	}
	for i, w := range words {
		words[i] = strings.ReplaceAll(w, "forge.localhost", fg.Host())
		for doc, real := range paths {
			words[i] = strings.ReplaceAll(words[i], doc, real)
		}
	}
	out, errOut, code := starter(t, words[1:]...)
	for doc, real := range paths { // the paths as the docs name them
		for _, r := range []*strings.Replacer{strings.NewReplacer(real, doc),
			strings.NewReplacer(strings.ReplaceAll(real, "/", "%2F"), strings.ReplaceAll(doc, "/", "%2F"))} {
			out, errOut = r.Replace(out), r.Replace(errOut)
		}
	}
	for _, p := range parts[1:] {
		f := strings.Fields(p)
		n, err := strconv.Atoi(strings.TrimPrefix(f[len(f)-1], "-"))
		if len(f) != 2 || err != nil || (f[0] != "head" && f[0] != "tail") {
			t.Fatalf("unsupported pipe %q in %s", p, line)
		}
		ls := strings.SplitAfter(strings.TrimSuffix(out, "\n"), "\n")
		if f[0] == "head" {
			ls = ls[:min(n, len(ls))]
		} else {
			ls = ls[max(0, len(ls)-n):]
		}
		out = strings.Join(ls, "")
		if !strings.HasSuffix(out, "\n") {
			out += "\n"
		}
	}
	return out + errOut, code
}

// shellWords splits a command line as a shell would, for the quoting the
// docs use ('…' and "…").
func shellWords(t *testing.T, s string) []string {
	t.Helper()
	var words []string
	var w strings.Builder
	in, quote := false, rune(0)
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			w.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ':
			if in {
				words = append(words, w.String())
				w.Reset()
				in = false
			}
		default:
			w.WriteRune(r)
			in = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %s", s)
	}
	if in {
		words = append(words, w.String())
	}
	return words
}

// docNormal are the parts of an output that differ from run to run, in
// the order they are replaced.
var docNormal = []struct {
	re   *regexp.Regexp
	with string
}{
	{regexp.MustCompile(`[ \t]+`), " "},
	{regexp.MustCompile(`(?m) +$`), ""},
	{regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`), "<uuid>"},
	{regexp.MustCompile(`\b[0-9a-f]{12,64}\b`), "<hex>"},
	{regexp.MustCompile(`\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z| UTC)?`), "<time>"},
	{regexp.MustCompile(`\b\d+[smhd] ago\b`), "<ago>"},
	{regexp.MustCompile(`forge\.localhost|127\.0\.0\.1:\d+|ui\.test`), "<host>"},
	{regexp.MustCompile(`\b(codebase|shard|repository id) \d+`), "$1 <id>"},
	{regexp.MustCompile(`"(id|codebaseId|shardId|fence|checkpointReceiptId|shard|codebase|next)": \d+`), `"$1": <id>`},
	// schedules list: how often each ran so far depends on the tests before.
	{regexp.MustCompile(`(?m)^(\S+ (?:active|paused(?: \([^)]*\))?) \S+) \d+ \d+ `), "$1 <n> <n> "},
}

func normalizeDoc(s string) []string {
	s = strings.TrimRight(s, "\n")
	for _, n := range docNormal {
		s = n.re.ReplaceAllString(s, n.with)
	}
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// matchLines matches got against want, where a want line "…" matches any
// run of lines.
func matchLines(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "…" {
		for i := 0; i <= len(got); i++ {
			if matchLines(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && want[0] == got[0] && matchLines(want[1:], got[1:])
}

func fixtureNames() []string {
	var names []string
	for n := range docFixtures {
		names = append(names, n)
	}
	return names
}

// docFixtures set up what a checked block's commands need and return the
// directory they run in.
var docFixtures = map[string]func(t *testing.T) docEnv{
	// Nothing: the stack as it is.
	"stack": func(t *testing.T) docEnv { return docEnv{dir: t.TempDir()} },
	// The rule files of the rules section.
	"rules": func(t *testing.T) docEnv {
		dir := t.TempDir()
		for name, content := range map[string]string{
			"my-rules.toml": "[extend]\nuseDefault = true\n\n[[rules]]\nid = \"acme-api-key\"\ndescription = \"Acme API key\"\n" +
				"regex = '''acme_(live|test)_[0-9a-zA-Z]{32}'''\nkeywords = [\"acme_live\", \"acme_test\"]\ntags = [\"acme\"]\n",
			"bad-rules.toml": "[extend]\nuseDefault = true\n\n[[rules]]\nid = \"acme-api-key\"\n" +
				"regex = '''acme_(live|test_[0-9a-zA-Z]{32}'''\nkeywords = [\"acme_live\", \"acme_test\"]\n",
			"broken.toml": "[[rules]]\nid = \"x\"\nregex = \"a\nb\"\n",
		} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return docEnv{dir: dir}
	},
	// The demo 'starter dev' plays (seedDemo and demo in dev.go, which
	// only the devstack build has): demo/hello with a planted key,
	// collected, renamed to demo/hello-world on the forge and collected
	// under its new name; demo/tools and acme/website collected.
	"demo": func(t *testing.T) docEnv {
		demoOnce.Do(func() { demoErr = seedDocDemo(t) })
		if demoErr != nil {
			t.Fatal(demoErr)
		}
		return docEnv{dir: t.TempDir()}
	},
	// The demo's snapshot: demo/hello-world's collected commit built on
	// the worker and pushed to its registry, then pulled by two runners,
	// dev-1 and dev-2 (removed at the end: other tests count snapshots).
	"snapshot": func(t *testing.T) docEnv {
		demoOnce.Do(func() { demoErr = seedDocDemo(t) })
		if demoErr != nil {
			t.Fatal(demoErr)
		}
		withVar(t, config.EnvSnapshotSources, buildRegistry.Addr())
		for _, id := range []string{"dev-1", "dev-2"} {
			startTestRunner(t, id, buildRegistry.Addr())
		}
		if out, errOut, code := starter(t, "snapshot", "create", "hello-world", "--from-repo", "demo/hello-world"); code != 0 {
			t.Fatalf("snapshot create: exit %d\n%s%s", code, out, errOut)
		}
		t.Cleanup(func() {
			if out, errOut, code := starter(t, "snapshot", "remove", "hello-world"); code != 0 {
				t.Errorf("snapshot remove: exit %d\n%s%s", code, out, errOut)
			}
		})
		return docEnv{dir: t.TempDir()}
	},
	// The schedules as a worker (or 'schedules apply') leaves them with
	// the default settings, none paused.
	"schedules": func(t *testing.T) docEnv {
		if out, errOut, code := starter(t, "schedules", "apply"); code != 0 {
			t.Fatalf("apply: exit %d\n%s%s", code, out, errOut)
		}
		waitSchedules(t, "recollection-sweep", "1h0m0s", false)
		for _, id := range scheduleIDs() {
			if out, errOut, code := starter(t, "schedules", "unpause", id); code != 0 {
				t.Fatalf("unpause %s: exit %d\n%s%s", id, code, out, errOut)
			}
			waitSchedules(t, id, "", false)
		}
		return docEnv{dir: t.TempDir()}
	},
	// The scan section's repository, /tmp/sd/myrepo in the docs: three
	// commits (a Go file; a GitHub token and an AWS key id; the AWS key
	// dropped), and with "+readme" one more (a README).
	"myrepo":        func(t *testing.T) docEnv { return myRepo(t, false) },
	"myrepo+readme": func(t *testing.T) docEnv { return myRepo(t, true) },
}

var (
	demoOnce sync.Once
	demoErr  error
)

func seedDocDemo(t *testing.T) error {
	if err := fg.SeedDemo(); err != nil {
		return err
	}
	collect := func(repo string) error {
		if out, errOut, code := starter(t, "collect", repo); code != 0 {
			return fmt.Errorf("collect %s: exit %d\n%s%s", repo, code, out, errOut)
		}
		return nil
	}
	if err := collect("demo/hello"); err != nil {
		return err
	}
	if err := fg.Rename("demo", "hello", "hello-world"); err != nil {
		return err
	}
	for _, r := range []string{"demo/hello-world", "demo/tools", "acme/website"} {
		if err := collect(r); err != nil {
			return err
		}
	}
	return nil
}

// waitSchedules waits until the schedule shows the interval (if given) and
// pause state asked for. The scheduler applies an update and a pause in
// the order it takes them from its queue, not the order they were sent: a
// pause sent right after an update (apply) can be undone by it.
func waitSchedules(t *testing.T, id, every string, paused bool) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("schedule %s %q paused=%t", id, every, paused), time.Minute, func() (bool, string) {
		out, _, _ := starter(t, "schedules", "list", "--json")
		var listed []scheduleInfo
		_ = json.Unmarshal([]byte(out), &listed)
		for _, s := range listed {
			if s.ID == id && s.Paused == paused && (every == "" || slices.Contains(s.Every, every)) {
				return true, ""
			}
		}
		return false, out
	})
}

var (
	myRepoOnce, readmeOnce sync.Once
	myRepoDir              string
)

func myRepo(t *testing.T, readme bool) docEnv {
	myRepoOnce.Do(func() {
		base, err := os.MkdirTemp(env.Dir, "sd")
		if err != nil {
			t.Fatal(err)
		}
		myRepoDir = filepath.Join(base, "myrepo")
		if err := os.Mkdir(myRepoDir, 0o755); err != nil {
			t.Fatal(err)
		}
		myRepoGit(t, "init", "-q", "-b", "main")
		git := func(args ...string) { myRepoGit(t, args...) }
		keyID := "AKIA" + "QYLPMN5HJKZ4T7XW"
		for _, c := range []struct{ msg, body string }{
			{"config", "package config\n\nconst Region = \"eu-west-1\"\n"},
			{"add keys", "package config\n\nconst Region = \"eu-west-1\"\nconst AWSKeyID = \"" + keyID + "\"\nconst GitHubToken = \"" + gittest.FakePAT("Sd1") + "\"\n"},
			{"drop the AWS key", "package config\n\nconst Region = \"eu-west-1\"\nconst GitHubToken = \"" + gittest.FakePAT("Sd1") + "\"\n"},
		} {
			if err := os.WriteFile(filepath.Join(myRepoDir, "config.go"), []byte(c.body), 0o644); err != nil {
				t.Fatal(err)
			}
			git("add", ".")
			git("commit", "-q", "-m", c.msg)
		}
	})
	if readme {
		readmeOnce.Do(func() {
			if err := os.WriteFile(filepath.Join(myRepoDir, "README.md"), []byte("# myrepo\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			myRepoGit(t, "add", ".")
			myRepoGit(t, "commit", "-q", "-m", "readme")
		})
	}
	return docEnv{dir: t.TempDir(), paths: map[string]string{"/tmp/sd/myrepo": myRepoDir}}
}

func myRepoGit(t *testing.T, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", myRepoDir, "-c", "user.name=alice", "-c", "user.email=alice@example.com"}, args...)...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}
