package repogen

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"gitfleet/internal/devstack/gittest"
)

// RealSpec describes a repository of real source code: every file of a
// source tree is brought in over a long history, one version after
// another, each version made only of the file's own lines. Generated
// content (Generate) flatters a secret scanner, whose keywords (key, token,
// secret, api, auth) real code is full of; this corpus does not.
//
// The default tree is the Go toolchain's own sources, $(go env GOROOT)/src,
// there on every machine with Go, the same for one Go version: about 11,500
// files, test keys and certificates included. The module cache is not used:
// its content differs between machines.
type RealSpec struct {
	// Root is the source tree ("" is $(go env GOROOT)/src). Its regular
	// files are the repository's paths, relative to Root; paths git would
	// need quoted are left out.
	Root string
	// Commits is the number of commits on all refs, merges included (at
	// least 1).
	Commits int
	// FilesPerCommit is the mean number of files a commit edits, besides
	// those it adds (0 is 3).
	FilesPerCommit int
	// BlobBytes, when set, is the size of all blobs to aim at: a commit
	// edits more files than FilesPerCommit says while the history is behind
	// the pace that reaches it, fewer while ahead. Without it the size
	// depends much on the seed: which directories are busy, and how large
	// their files are.
	BlobBytes int64
	// MergeEvery opens a topic branch about every MergeEvery commits: it
	// edits a few files of one directory in a few commits of its own, while
	// main goes on with others, then main merges it. 0 means no topic
	// branches. The last topic is left at refs/heads/topic, merged or not.
	MergeEvery int
	// Releases is the number of release branches
	// (refs/heads/release-branch.v1.N) forked from main late in the
	// history, each with a few fixes of its own and tags v1.N.0 (the fork)
	// and v1.N.1 (its tip).
	Releases int
	// Tags is the number of tags on main spread over the history,
	// alternately annotated (v0.N.0) and lightweight (weekly.YYYY-MM-DD).
	Tags int
	// Seed selects the order files arrive in, which are edited, and how.
	Seed int64
}

// RealInfo describes a repository RealCode generated. Info.Commits are
// main's first-parent commits, the root first.
type RealInfo struct {
	Info
	// Root is the source tree read and Sources the number of its files
	// used.
	Root    string
	Sources int
	// Merges is the number of merge commits.
	Merges int
	// Took is how long the generation took, and Cached says it was done
	// by an earlier run (CachedRealCode).
	Took   time.Duration
	Cached bool `json:"-"`
}

// realCodeVersion changes whenever the same RealSpec would generate another
// repository: it is part of the cache key.
const realCodeVersion = 3

// A file's lines are edited a block at a time: a block is deleted (and
// kept, to be restored later), a deleted block restored where it was, a
// block moved elsewhere, or the next lines of the real file appended (a file
// is introduced as a prefix of its lines and grows).
const (
	maxRemoved   = 6  // deleted blocks a file remembers
	meanBlock    = 8  // lines of a deleted or moved block, on average
	dirHeatShift = 5  // flattens the Zipf law of directories' activity
	hotSize      = 64 // KiB: larger files are edited proportionally less
)

// realSource is one file of the source tree.
type realSource struct {
	path string // slash-separated, relative to the root
	size int64
	exec bool
	dir  int
}

// realFile is a file's history so far: its current version, as indices of
// the real file's lines.
type realFile struct {
	intro, alive bool
	binary       bool
	nlines       int32
	lines        []int32
	next         int32     // lines [0, next) of the real file have appeared
	removed      [][]int32 // deleted blocks, the oldest first
	owner        int       // the topic branch editing it, 0 for main
	heat         float64   // how often it is edited, once introduced
	blob         [sha1.Size]byte
}

type realTopic struct {
	n     int
	tip   int // the mark of its last commit (the fork point before any)
	files []int
	left  int // commits before the merge
}

type realGen struct {
	spec    RealSpec
	root    string
	srcs    []realSource
	files   []realFile
	bw      *bufio.Writer
	rng     *rand.Rand
	weights fenwick // edit weights: heat while alive, unowned and editable

	order      []int // introduction order: directories shuffled, files in order
	introduced int
	deleted    []int // files removed from main, which may come back

	commits, mainTip int // marks are commit numbers, from 1
	mainMarks        []int
	merges           int
	gain             float64 // the integral part of steering to BlobBytes
	when             int64
	topic            *realTopic
	topics           int
	releases         []int // the commit count at which each release forks
	tagAt            []int // the commit count after which each tag is set
	tagNames         map[string]bool

	seen      map[[sha1.Size]byte]struct{}
	blobs     int
	blobBytes int64
	paths     int

	loaded  int // the source cached in data and off, -1 for none
	data    []byte
	off     []int32
	buf     []byte
	hdr     []byte
	touched []int
	changes bytes.Buffer // the file commands of the next commit
	err     error        // the first source file that could not be read
}

var realAuthors = []string{
	"Ada Ortiz", "Bram Koenig", "Chidi Obi", "Dana Levy", "Emil Sorensen", "Farah Haddad",
	"Goro Tanaka", "Hana Novak", "Ivo Petrov", "Jun Park", "Kaia Moana", "Luis Romero",
	"Mira Shah", "Nils Berg", "Olu Adeyemi", "Priya Nair",
}

var realVerbs = []string{
	"fix", "update", "simplify", "clean up", "document", "refactor", "speed up",
	"handle errors in", "add tests for", "rename helpers in", "revert change to", "tidy",
}

// listSources lists the files of root that the repository will hold, in
// lexical order.
func listSources(root string) ([]realSource, error) {
	var out []realSource
	dirs := map[string]int{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !plainPath(rel) {
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		dir := path.Dir(rel)
		n, ok := dirs[dir]
		if !ok {
			n = len(dirs)
			dirs[dir] = n
		}
		out = append(out, realSource{path: rel, size: fi.Size(), exec: fi.Mode()&0o111 != 0, dir: n})
		return nil
	})
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("repogen: no files under %s", root)
	}
	return out, err
}

// plainPath says whether a path can be written in a fast-import stream
// unquoted (and needs no quoting in git's output either).
func plainPath(p string) bool {
	for _, c := range []byte(p) {
		if c < ' ' || c >= 0x7f || c == '"' || c == '\\' {
			return false
		}
	}
	return true
}

// goSourceRoot is $(go env GOROOT)/src.
func goSourceRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOROOT").Output()
	root := strings.TrimSpace(string(out))
	if err != nil || root == "" {
		return "", fmt.Errorf("repogen: go env GOROOT: %v", err)
	}
	return filepath.Join(root, "src"), nil
}

func (s *RealSpec) resolve() error {
	if s.Commits < 1 {
		return errors.New("repogen: Commits must be at least 1")
	}
	if s.FilesPerCommit < 0 || s.BlobBytes < 0 || s.MergeEvery < 0 || s.Releases < 0 || s.Tags < 0 {
		return errors.New("repogen: negative count in spec")
	}
	if s.FilesPerCommit == 0 {
		s.FilesPerCommit = 3
	}
	if s.Root == "" {
		root, err := goSourceRoot()
		if err != nil {
			return err
		}
		s.Root = root
	}
	root, err := filepath.Abs(s.Root)
	s.Root = root
	return err
}

// RealCode creates a bare repository at dir (which must not exist or be
// empty) holding the history spec describes, written by git fast-import
// from a stream: the source files are read again for every version, never
// held all at once. The same spec and source tree give the same commit ids.
func RealCode(dir string, spec RealSpec) (RealInfo, error) {
	start := time.Now()
	if err := spec.resolve(); err != nil {
		return RealInfo{}, err
	}
	srcs, err := listSources(spec.Root)
	if err != nil {
		return RealInfo{}, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return RealInfo{}, fmt.Errorf("repogen: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return RealInfo{}, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return RealInfo{}, err
	}
	if _, err := gittest.Run(dir, nil, "init", "--quiet", "--bare", "--initial-branch=main"); err != nil {
		return RealInfo{}, err
	}

	marks := filepath.Join(dir, "repogen-marks")
	pr, pw := io.Pipe()
	g := newRealGen(spec, srcs, pw)
	done := make(chan error, 1)
	go func() {
		err := g.run()
		pw.CloseWithError(err)
		done <- err
	}()
	_, err = gittest.Run(dir, pr, "fast-import", "--quiet", "--export-marks="+marks)
	pr.CloseWithError(errors.New("fast-import ended"))
	// fast-import's own error says more than the broken pipe it left.
	if serr := <-done; err == nil {
		err = serr
	}
	if err != nil {
		return RealInfo{}, err
	}

	info := RealInfo{
		Info: Info{Refs: map[string]string{}, Blobs: g.blobs, BlobBytes: g.blobBytes, Paths: g.paths},
		Root: spec.Root, Sources: len(srcs), Merges: g.merges,
	}
	byMark, err := readMarks(marks, spec.Commits)
	if err != nil {
		return RealInfo{}, err
	}
	os.Remove(marks)
	for _, m := range g.mainMarks {
		info.Commits = append(info.Commits, byMark[m])
	}
	info.Head = byMark[g.mainTip]
	if info.Refs, err = readRefs(dir); err != nil {
		return RealInfo{}, err
	}
	// Packed as a clone from a forge would be, not as fast-import left it
	// (deltas against the previous version of a path only, three times
	// the size).
	if _, err := gittest.Run(dir, nil, "repack", "-adfq"); err != nil {
		return RealInfo{}, err
	}
	info.Took = time.Since(start)
	return info, nil
}

// CachedRealCode returns a bare repository RealCode generated for spec,
// kept under cacheDir between runs: generating one of 0.5 GB takes most
// of a minute. The key is the spec, the generator's version and the source
// tree's files (paths, sizes, modes), so another Go version (another
// GOROOT/src) makes another repository; only the newest is kept. The
// repository is shared: clone it to change it.
func CachedRealCode(cacheDir string, spec RealSpec) (string, RealInfo, error) {
	if err := spec.resolve(); err != nil {
		return "", RealInfo{}, err
	}
	srcs, err := listSources(spec.Root)
	if err != nil {
		return "", RealInfo{}, err
	}
	h := sha256.New()
	fmt.Fprintf(h, "%d\n%+v\n", realCodeVersion, spec)
	for _, s := range srcs {
		fmt.Fprintf(h, "%s %d %t\n", s.path, s.size, s.exec)
	}
	name := fmt.Sprintf("realcode-%x", h.Sum(nil)[:8])
	dir := filepath.Join(cacheDir, name+".git")
	infoFile := filepath.Join(dir, "repogen-info.json")
	var info RealInfo
	if b, err := os.ReadFile(infoFile); err == nil && json.Unmarshal(b, &info) == nil {
		info.Cached = true
		return dir, info, nil
	}

	if err := os.MkdirAll(cacheDir, 0o755); err != nil {
		return "", RealInfo{}, err
	}
	tmp, err := os.MkdirTemp(cacheDir, "tmp-"+name+"-")
	if err != nil {
		return "", RealInfo{}, err
	}
	defer os.RemoveAll(tmp)
	if info, err = RealCode(tmp, spec); err != nil {
		return "", RealInfo{}, err
	}
	b, err := json.Marshal(info)
	if err == nil {
		err = os.WriteFile(filepath.Join(tmp, "repogen-info.json"), b, 0o644)
	}
	if err != nil {
		return "", RealInfo{}, err
	}
	// Another run may have got there first: either copy is the same.
	if err := os.Rename(tmp, dir); err != nil && !fileExists(infoFile) {
		return "", RealInfo{}, err
	}
	olds, _ := filepath.Glob(filepath.Join(cacheDir, "realcode-*.git"))
	for _, old := range olds {
		if old != dir {
			os.RemoveAll(old)
		}
	}
	return dir, info, nil
}

func fileExists(p string) bool { _, err := os.Stat(p); return err == nil }

// readMarks reads fast-import's exported marks: commit ids by mark.
func readMarks(file string, n int) ([]string, error) {
	mb, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	out := make([]string, n+1)
	for _, line := range bytes.Split(mb, []byte{'\n'}) {
		m, h, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(m) < 2 || m[0] != ':' {
			continue
		}
		i, err := strconv.Atoi(string(m[1:]))
		if err != nil || i < 1 || i > n {
			return nil, fmt.Errorf("repogen: unexpected mark %q", line)
		}
		out[i] = string(h)
	}
	return out, nil
}

// readRefs maps every ref to the commit it points at (annotated tags
// peeled).
func readRefs(dir string) (map[string]string, error) {
	out, err := gittest.Run(dir, nil, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)")
	if err != nil {
		return nil, err
	}
	refs := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) >= 2 {
			refs[f[0]] = f[len(f)-1]
		}
	}
	return refs, nil
}

func newRealGen(spec RealSpec, srcs []realSource, w io.Writer) *realGen {
	g := &realGen{
		spec: spec, root: spec.Root, srcs: srcs,
		files:    make([]realFile, len(srcs)),
		bw:       bufio.NewWriterSize(w, 256<<10),
		rng:      newRand(spec.Seed, 10, 0, 0),
		weights:  newFenwick(len(srcs)),
		seen:     map[[sha1.Size]byte]struct{}{},
		tagNames: map[string]bool{},
		when:     baseTime,
		loaded:   -1,
		gain:     1,
	}
	// Directories arrive in a random order, each one's files in order;
	// directories' activity follows a Zipf law over another random order.
	ndirs := 0
	for _, s := range srcs {
		ndirs = max(ndirs, s.dir+1)
	}
	byDir := make([][]int, ndirs)
	for i, s := range srcs {
		byDir[s.dir] = append(byDir[s.dir], i)
	}
	arrive := g.rng.Perm(ndirs)
	for _, d := range arrive {
		g.order = append(g.order, byDir[d]...)
	}
	activity := g.rng.Perm(ndirs)
	for i, s := range srcs {
		// Larger files change more often (more code, more reasons), up to
		// a point: the largest are tables and test data.
		heat := 1 / math.Pow(float64(activity[s.dir]+dirHeatShift), 0.9)
		heat *= 0.2 + 1.6*g.rng.Float64()
		kib := max(float64(s.size)/1024, 0.5)
		if kib <= hotSize {
			heat *= math.Sqrt(kib)
		} else {
			heat *= math.Sqrt(hotSize) * hotSize / kib
		}
		g.files[i].heat = heat
	}
	for r := 0; r < spec.Releases; r++ {
		g.releases = append(g.releases, spec.Commits*(55+40*r/max(spec.Releases, 1))/100)
	}
	for k := 0; k < spec.Tags; k++ {
		g.tagAt = append(g.tagAt, spec.Commits*(k+1)/(spec.Tags+1))
	}
	return g
}

func (g *realGen) run() error {
	g.bw.WriteString("feature done\n")
	for g.commits < g.spec.Commits {
		switch {
		case g.topic != nil && g.rng.IntN(10) < 4:
			if g.topic.left > 0 {
				g.topicCommit()
			} else {
				g.merge()
			}
		case len(g.releases) > 0 && g.commits >= g.releases[0] && g.commits > 0:
			g.releases = g.releases[1:]
			g.release(g.spec.Releases - len(g.releases))
		default:
			if g.topic == nil && g.spec.MergeEvery > 0 && g.commits > 0 && g.rng.IntN(g.spec.MergeEvery) == 0 {
				g.openTopic()
			}
			g.mainCommit()
			for len(g.tagAt) > 0 && g.commits >= g.tagAt[0] {
				g.tagAt = g.tagAt[1:]
				g.tagMain(g.spec.Tags - len(g.tagAt))
			}
		}
		if err := g.bw.Flush(); err != nil {
			return err
		}
		if g.err != nil {
			return fmt.Errorf("repogen: %w", g.err)
		}
	}
	if g.topic != nil {
		fmt.Fprintf(g.bw, "reset refs/heads/topic\nfrom :%d\n\n", g.topic.tip)
	}
	g.bw.WriteString("done\n")
	return g.bw.Flush()
}

// mainCommit adds files when the history is behind the schedule that brings
// every file in by 80% of the commits, and edits a few files.
func (g *realGen) mainCommit() {
	g.touched = g.touched[:0]
	var msg string
	due := int(math.Ceil(float64(len(g.srcs)) * min(1, float64(g.commits+1)/(0.8*float64(g.spec.Commits)))))
	if g.introduced < due {
		added := g.introduceBatch()
		msg = g.subject(added[0], "add "+path.Base(g.srcs[added[0]].path))
		if len(added) > 1 {
			msg = path.Dir(g.srcs[added[0]].path) + ": add " + strconv.Itoa(len(added)) + " files"
		}
	}
	mean := float64(g.spec.FilesPerCommit)
	if g.spec.BlobBytes > 0 {
		// Proportional and integral: the ratio alone would settle at its
		// square root of the aim.
		pace := float64(g.spec.BlobBytes) * float64(g.commits+1) / float64(g.spec.Commits)
		ratio := min(8, max(0.125, pace/max(1, float64(g.blobBytes))))
		g.gain = min(8, max(0.125, g.gain*math.Pow(ratio, 0.05)))
		mean *= ratio * g.gain
	}
	edits := g.editCount(mean)
	if len(g.touched) > 0 {
		edits /= 2
	}
	for e := 0; e < edits; e++ {
		f := g.pick()
		if f < 0 || slices.Contains(g.touched, f) {
			continue
		}
		g.touched = append(g.touched, f)
		g.edit(&g.files[f])
		g.fileChange(f, g.content(f, &g.files[f]))
	}
	if msg == "" && len(g.touched) > 0 {
		msg = g.subject(g.touched[0], realVerbs[g.rng.IntN(len(realVerbs))]+" "+path.Base(g.srcs[g.touched[0]].path))
	}
	// Now and then a file is removed, and a removed one comes back as it was.
	if g.rng.IntN(300) == 0 {
		if f := g.pick(); f >= 0 && !slices.Contains(g.touched, f) {
			g.files[f].alive = false
			g.weights.set(f, 0)
			g.deleted = append(g.deleted, f)
			g.changes.WriteString("D " + g.srcs[f].path + "\n")
			if msg == "" {
				msg = g.subject(f, "remove "+path.Base(g.srcs[f].path))
			}
		}
	} else if len(g.deleted) > 0 && g.rng.IntN(400) == 0 {
		i := g.rng.IntN(len(g.deleted))
		f := g.deleted[i]
		g.deleted = slices.Delete(g.deleted, i, i+1)
		g.files[f].alive = true
		g.weights.set(f, g.editWeight(f))
		g.blobChange(f)
		if msg == "" {
			msg = g.subject(f, "restore "+path.Base(g.srcs[f].path))
		}
	}
	if msg == "" {
		msg = "all: gofmt" // nothing to change: an empty commit
	}
	parent := g.mainTip
	g.mainTip = g.commit("refs/heads/main", msg, parent, 0)
	g.mainMarks = append(g.mainMarks, g.mainTip)
}

// introduceBatch brings in the next few files of one directory, or all of
// its remaining ones (a package imported at once).
func (g *realGen) introduceBatch() []int {
	n := 1 + g.rng.IntN(5)
	if g.rng.IntN(20) == 0 {
		n = 40
	}
	var added []int
	dir := g.srcs[g.order[g.introduced]].dir
	for len(added) < n && g.introduced < len(g.order) {
		f := g.order[g.introduced]
		if g.srcs[f].dir != dir {
			break
		}
		g.introduced++
		g.introduce(f)
		g.fileChange(f, g.content(f, &g.files[f]))
		added = append(added, f)
		g.touched = append(g.touched, f)
	}
	return added
}

// introduce makes the file's first version: the whole file or, for most
// text files, a prefix of its lines, which later edits grow.
func (g *realGen) introduce(f int) {
	file := &g.files[f]
	g.load(f)
	file.intro, file.alive = true, true
	file.nlines = int32(len(g.off) - 1)
	head := g.data[:min(len(g.data), 8000)]
	file.binary = bytes.IndexByte(head, 0) >= 0
	n := file.nlines
	if !file.binary && n > 8 && g.rng.IntN(10) < 7 {
		n = max(5, int32(float64(n)*(0.25+0.5*g.rng.Float64())))
	}
	file.lines = make([]int32, n)
	for i := range file.lines {
		file.lines[i] = int32(i)
	}
	file.next = n
	g.paths++
	g.weights.set(f, g.editWeight(f))
}

// editWeight is how likely the file is to be edited now.
func (g *realGen) editWeight(f int) float64 {
	file := &g.files[f]
	if !file.alive || file.binary || file.owner != 0 || file.nlines < 2 {
		return 0
	}
	return file.heat
}

// editCount is the number of files a commit edits: geometric, of the
// given mean (at least 1).
func (g *realGen) editCount(mean float64) int {
	n := 1
	for p := 1 - 1/mean; n < 30 && g.rng.Float64() < p; n++ {
	}
	return n
}

// pick draws a file to edit by weight, -1 when none can be.
func (g *realGen) pick() int {
	for try := 0; try < 4; try++ {
		total := g.weights.total()
		if total <= 1e-12 {
			return -1
		}
		if f := g.weights.find(g.rng.Float64() * total); f < len(g.files) && g.weights.w[f] > 0 {
			return f
		}
	}
	return -1
}

// edit changes a file's lines by one or two block operations.
func (g *realGen) edit(file *realFile) {
	ops := 1 + g.rng.IntN(3)/2
	for i := 0; i < ops; i++ {
		x := g.rng.Float64()
		switch {
		case file.next < file.nlines && x < 0.45:
			g.grow(file)
		case len(file.removed) > 0 && x < 0.7:
			g.restore(file)
		case x < 0.85 && len(file.lines) > 4:
			g.remove(file)
		default:
			g.move(file)
		}
	}
}

func (g *realGen) blockLen(limit int) int {
	n := 1 + int(g.rng.ExpFloat64()*(meanBlock-1))
	return max(1, min(n, limit))
}

// grow appends the real file's next lines.
func (g *realGen) grow(file *realFile) {
	k := int32(max(1, int(float64(file.nlines)*(0.03+0.15*g.rng.Float64()))))
	k = min(k, file.nlines-file.next)
	block := make([]int32, k)
	for i := range block {
		block[i] = file.next + int32(i)
	}
	file.next += k
	file.lines = insertInOrder(file.lines, block)
}

// remove deletes a block of lines and remembers it.
func (g *realGen) remove(file *realFile) {
	n := g.blockLen(len(file.lines) / 4)
	at := g.rng.IntN(len(file.lines) - n + 1)
	block := slices.Clone(file.lines[at : at+n])
	file.lines = slices.Delete(file.lines, at, at+n)
	if len(file.removed) == maxRemoved {
		file.removed = file.removed[1:]
	}
	file.removed = append(file.removed, block)
}

// restore puts a deleted block back where it was.
func (g *realGen) restore(file *realFile) {
	i := g.rng.IntN(len(file.removed))
	block := file.removed[i]
	file.removed = slices.Delete(file.removed, i, i+1)
	file.lines = insertInOrder(file.lines, block)
}

// move moves a block of lines elsewhere in the file.
func (g *realGen) move(file *realFile) {
	if len(file.lines) < 2 {
		return
	}
	n := g.blockLen(len(file.lines) / 2)
	at := g.rng.IntN(len(file.lines) - n + 1)
	block := slices.Clone(file.lines[at : at+n])
	file.lines = slices.Delete(file.lines, at, at+n)
	to := g.rng.IntN(len(file.lines) + 1)
	file.lines = slices.Insert(file.lines, to, block...)
}

// insertInOrder inserts block after the last line that comes before it in
// the real file (at the start if none does).
func insertInOrder(lines, block []int32) []int32 {
	at := 0
	for i := len(lines) - 1; i >= 0; i-- {
		if lines[i] < block[0] {
			at = i + 1
			break
		}
	}
	return slices.Insert(lines, at, block...)
}

// load reads the f-th source file and splits it in lines: off[i] is where
// line i starts, off[len(off)-1] the file's end.
func (g *realGen) load(f int) {
	if g.loaded == f {
		return
	}
	data, err := os.ReadFile(filepath.Join(g.root, filepath.FromSlash(g.srcs[f].path)))
	if err != nil && g.err == nil {
		g.err = err // run stops after this commit
	}
	g.data, g.loaded = data, f
	g.off = append(g.off[:0], 0)
	for i, c := range data {
		if c == '\n' {
			g.off = append(g.off, int32(i+1))
		}
	}
	if len(data) > 0 && data[len(data)-1] != '\n' {
		g.off = append(g.off, int32(len(data)))
	}
}

// content is the file's current version: its lines in order, every line
// but the last ending in a newline.
func (g *realGen) content(f int, file *realFile) []byte {
	g.load(f)
	if file.binary {
		return g.data
	}
	buf := g.buf[:0]
	for i, l := range file.lines {
		if int(l)+1 >= len(g.off) {
			continue // the file shrank under the generator
		}
		line := g.data[g.off[l]:g.off[l+1]]
		buf = append(buf, line...)
		if line[len(line)-1] != '\n' && i < len(file.lines)-1 {
			buf = append(buf, '\n')
		}
	}
	g.buf = buf
	return buf
}

func (g *realGen) mode(f int) string {
	if g.srcs[f].exec {
		return "100755"
	}
	return "100644"
}

// fileChange records content as the file's blob and adds the fast-import
// file command writing it to the next commit: inline the first time the
// content is met, by id after (fast-import knows every object it wrote).
func (g *realGen) fileChange(f int, content []byte) {
	h := sha1.New()
	g.hdr = append(g.hdr[:0], "blob "...)
	g.hdr = strconv.AppendInt(g.hdr, int64(len(content)), 10)
	g.hdr = append(g.hdr, 0)
	h.Write(g.hdr)
	h.Write(content)
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	g.files[f].blob = sum
	if _, ok := g.seen[sum]; ok {
		g.blobChange(f)
		return
	}
	g.seen[sum] = struct{}{}
	g.blobs++
	g.blobBytes += int64(len(content))
	fmt.Fprintf(&g.changes, "M %s inline %s\ndata %d\n", g.mode(f), g.srcs[f].path, len(content))
	g.changes.Write(content)
	g.changes.WriteByte('\n')
}

// blobChange adds a command writing the file's current blob, already in
// the repository.
func (g *realGen) blobChange(f int) {
	fmt.Fprintf(&g.changes, "M %s %x %s\n", g.mode(f), g.files[f].blob, g.srcs[f].path)
}

func (g *realGen) subject(f int, what string) string {
	return path.Dir(g.srcs[f].path) + ": " + what
}

// commit writes a commit on ref with the given parents (0: none) and the
// file changes gathered, and returns its mark.
func (g *realGen) commit(ref, msg string, parent, merge int) int {
	g.commits++
	// About 50 minutes apart on average: 25,000 commits from baseTime
	// (November 2023) end in 2026, in the past. A history in the future
	// would make a commit added now (dated now) older than its parent,
	// and a walk by date reads all the history above it.
	g.when += int64(60 * (1 + g.rng.IntN(100)))
	who := realAuthors[g.rng.IntN(len(realAuthors))]
	ident := who + " <" + strings.ToLower(strings.ReplaceAll(who, " ", ".")) + "@example.invalid> " + strconv.FormatInt(g.when, 10) + " +0000\n"
	msg += "\n"
	fmt.Fprintf(g.bw, "commit %s\nmark :%d\nauthor %scommitter %sdata %d\n%s", ref, g.commits, ident, ident, len(msg), msg)
	if parent > 0 {
		fmt.Fprintf(g.bw, "from :%d\n", parent)
	}
	if merge > 0 {
		fmt.Fprintf(g.bw, "merge :%d\n", merge)
		g.merges++
	}
	g.bw.Write(g.changes.Bytes())
	g.changes.Reset()
	g.bw.WriteString("\n")
	return g.commits
}

// openTopic forks a topic branch from main that owns a few files of one
// directory until it is merged: main leaves them alone meanwhile, so the
// merge takes the topic's versions and is clean.
func (g *realGen) openTopic() {
	seed := g.pick()
	if seed < 0 {
		return
	}
	g.topics++
	t := &realTopic{n: g.topics, tip: g.mainTip, left: 1 + g.rng.IntN(6), files: []int{seed}}
	want := 1 + g.rng.IntN(4)
	dir := g.srcs[seed].dir
	for f := range g.files {
		if len(t.files) > want {
			break
		}
		if g.srcs[f].dir == dir && f != seed && g.weights.w[f] > 0 {
			t.files = append(t.files, f)
		}
	}
	for _, f := range t.files {
		g.files[f].owner = t.n
		g.weights.set(f, 0)
	}
	g.topic = t
}

func (g *realGen) topicCommit() {
	t := g.topic
	n := 1 + g.rng.IntN(min(2, len(t.files)))
	for _, i := range g.rng.Perm(len(t.files))[:n] {
		f := t.files[i]
		g.edit(&g.files[f])
		g.fileChange(f, g.content(f, &g.files[f]))
	}
	f := t.files[0]
	msg := g.subject(f, realVerbs[g.rng.IntN(len(realVerbs))]+" "+path.Base(g.srcs[f].path))
	ref := "refs/heads/topic"
	if t.left == 1 && g.rng.IntN(3) == 0 {
		msg += " (review comments)"
	}
	t.tip = g.commit(ref, msg, t.tip, 0)
	t.left--
}

// merge merges the topic into main: main's tree with the topic's files.
func (g *realGen) merge() {
	t := g.topic
	for _, f := range t.files {
		g.files[f].owner = 0
		g.blobChange(f)
		g.weights.set(f, g.editWeight(f))
	}
	msg := fmt.Sprintf("Merge branch 'topic-%d'", t.n)
	g.mainTip = g.commit("refs/heads/main", msg, g.mainTip, t.tip)
	g.mainMarks = append(g.mainMarks, g.mainTip)
	g.topic = nil
}

// release forks release-branch.v1.n from main and gives it a few fixes of
// its own, made on copies of the files (main's go on unchanged).
func (g *realGen) release(n int) {
	name := fmt.Sprintf("release-branch.v1.%d", n)
	g.tag(fmt.Sprintf("v1.%d.0", n), g.mainTip, true)
	tip := g.mainTip
	copies := map[int]*realFile{}
	for i := 2 + g.rng.IntN(3); i > 0 && g.commits < g.spec.Commits; i-- {
		first := -1
		var picked []int
		for k := 1 + g.rng.IntN(2); k > 0; k-- {
			f := g.pick()
			if f < 0 || slices.Contains(picked, f) {
				continue
			}
			picked = append(picked, f)
			c, ok := copies[f]
			if !ok {
				cp := g.files[f]
				cp.lines, cp.removed = slices.Clone(cp.lines), slices.Clone(cp.removed)
				c = &cp
				copies[f] = c
			}
			g.edit(c)
			// fileChange records the blob as the file's: keep main's.
			mainBlob := g.files[f].blob
			g.fileChange(f, g.content(f, c))
			g.files[f].blob = mainBlob
			first = f
		}
		if first < 0 {
			break
		}
		msg := fmt.Sprintf("[%s] %s", name, g.subject(first, realVerbs[g.rng.IntN(len(realVerbs))]+" "+path.Base(g.srcs[first].path)))
		tip = g.commit("refs/heads/"+name, msg, tip, 0)
	}
	g.tag(fmt.Sprintf("v1.%d.1", n), tip, true)
}

// tagMain tags main's tip: annotated releases and lightweight weeklies.
func (g *realGen) tagMain(k int) {
	if k%2 == 1 {
		g.tag(fmt.Sprintf("v0.%d.0", k), g.mainTip, true)
		return
	}
	g.tag("weekly."+time.Unix(g.when, 0).UTC().Format("2006-01-02"), g.mainTip, false)
}

func (g *realGen) tag(name string, mark int, annotated bool) {
	for i := 2; g.tagNames[name]; i++ {
		name = strings.TrimSuffix(name, "."+strconv.Itoa(i-1)) + "." + strconv.Itoa(i)
	}
	g.tagNames[name] = true
	if !annotated {
		fmt.Fprintf(g.bw, "reset refs/tags/%s\nfrom :%d\n\n", name, mark)
		return
	}
	msg := "Release " + name + "\n"
	fmt.Fprintf(g.bw, "tag %s\nfrom :%d\ntagger %s <release@example.invalid> %d +0000\ndata %d\n%s\n",
		name, mark, realAuthors[0], g.when+30, len(msg), msg)
}

// fenwick is a Fenwick tree of non-negative weights, to draw an index with
// probability proportional to its weight as weights change.
type fenwick struct {
	t []float64 // 1-based partial sums
	w []float64
}

func newFenwick(n int) fenwick { return fenwick{t: make([]float64, n+1), w: make([]float64, n)} }

func (f fenwick) set(i int, w float64) {
	d := w - f.w[i]
	f.w[i] = w
	for j := i + 1; j < len(f.t); j += j & -j {
		f.t[j] += d
	}
}

func (f fenwick) total() float64 {
	var s float64
	for j := len(f.t) - 1; j > 0; j -= j & -j {
		s += f.t[j]
	}
	return s
}

// find returns the index whose cumulative weight range holds x.
func (f fenwick) find(x float64) int {
	pos := 0
	step := 1
	for step*2 < len(f.t) {
		step *= 2
	}
	for ; step > 0; step /= 2 {
		if pos+step < len(f.t) && f.t[pos+step] <= x {
			pos += step
			x -= f.t[pos]
		}
	}
	return pos
}
