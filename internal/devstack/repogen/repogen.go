package repogen

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gitfleet/internal/devstack/gittest"
)

// Spec describes a repository to generate.
type Spec struct {
	// Commits is the length of the linear history on refs/heads/main (at
	// least 1). Commit index 0 is the root.
	Commits int
	// FilesPerCommit is the number of files added or modified by each commit
	// (about a third are new paths, the rest modify existing ones), two or
	// three directories deep (top/module[/sub]/file, about a dozen files a
	// directory). Every add or modify is a new blob.
	FilesPerCommit int
	// Refs is the total number of refs including main: Refs-1 extra refs
	// point at main's commits spread evenly over the history, cycling through
	// a branch (refs/heads/branch-NNNN), a lightweight tag (refs/tags/tNNNN)
	// and an annotated tag (refs/tags/vNNNN). 0 or 1 means main only.
	Refs int
	// BlobSize is the typical size in bytes of a generated file (each path
	// gets a size between BlobSize/2 and 1.5×BlobSize); 0 means 1024.
	BlobSize int
	// Secrets are planted as they are: the file's whole content is Content,
	// written at Path by the commit with index Commit (in addition to that
	// commit's generated files). A later generated change never touches a
	// secret's path.
	Secrets []Secret
	// Binary is the number of binary blobs (random bytes with NULs, under
	// assets/bin/) added by commits spread over the history.
	Binary int
	// Seed selects the pseudo-random content.
	Seed int64
}

// Secret is content planted at a path by one commit.
type Secret struct {
	Commit        int
	Path, Content string
}

// Info describes a generated repository.
type Info struct {
	// Head is main's tip commit.
	Head string
	// Commits are main's commits by index (Commits[0] is the root).
	Commits []string
	// Refs maps every ref name (refs/heads/main included) to the commit it
	// points at (annotated tags peeled).
	Refs map[string]string
	// Blobs is the number of distinct blobs in the repository and BlobBytes
	// their total size.
	Blobs     int
	BlobBytes int64
	// Paths is the number of distinct file paths ever written.
	Paths int
}

// Identity and dates of every generated commit and tag: commit i is dated
// baseTime + i minutes.
const (
	genName  = "Gitfleet Repogen"
	genEmail = "repogen@example.invalid"
	baseTime = 1700000000
)

// streamInfo is what Stream learns while writing.
type streamInfo struct {
	blobs     int
	blobBytes int64
	paths     int
}

// Stream writes the fast-import stream for spec to w. The stream writes
// refs/heads/main and the extra refs; load it into an empty repository.
func Stream(w io.Writer, spec Spec) error {
	_, err := stream(w, spec)
	return err
}

func (s *Spec) validate() error {
	if s.Commits < 1 {
		return errors.New("repogen: Commits must be at least 1")
	}
	if s.FilesPerCommit < 0 || s.Refs < 0 || s.BlobSize < 0 || s.Binary < 0 {
		return errors.New("repogen: negative count in spec")
	}
	for _, sec := range s.Secrets {
		if sec.Commit < 0 || sec.Commit >= s.Commits {
			return fmt.Errorf("repogen: secret at commit %d outside [0,%d)", sec.Commit, s.Commits)
		}
		p := sec.Path
		if p == "" || strings.HasPrefix(p, "/") || strings.HasSuffix(p, "/") || strings.HasPrefix(p, `"`) ||
			strings.ContainsAny(p, "\n\x00") || strings.Contains(p, "//") {
			return fmt.Errorf("repogen: bad secret path %q", p)
		}
		for _, c := range strings.Split(p, "/") {
			if c == "." || c == ".." || c == ".git" {
				return fmt.Errorf("repogen: bad secret path %q", p)
			}
		}
	}
	return nil
}

type generator struct {
	spec  Spec
	bw    *bufio.Writer
	info  streamInfo
	seen  map[[sha1.Size]byte]struct{}
	paths []genPath // generated paths by k
	// secretPaths are never picked for generated changes.
	secretPaths map[string]bool
	buf         []byte
	hdr         []byte
}

type genPath struct {
	path    string
	kind    int
	size    int
	version int
}

func stream(w io.Writer, spec Spec) (streamInfo, error) {
	if err := spec.validate(); err != nil {
		return streamInfo{}, err
	}
	if spec.BlobSize == 0 {
		spec.BlobSize = 1024
	}
	g := &generator{
		spec:        spec,
		bw:          bufio.NewWriterSize(w, 256<<10),
		seen:        make(map[[sha1.Size]byte]struct{}, spec.Commits*spec.FilesPerCommit+len(spec.Secrets)+spec.Binary),
		secretPaths: map[string]bool{},
	}
	secrets := map[int][]Secret{}
	for _, s := range spec.Secrets {
		secrets[s.Commit] = append(secrets[s.Commit], s)
		g.secretPaths[s.Path] = true
	}
	binAt := map[int]int{} // commit index -> number of binary blobs it adds
	for b := 0; b < spec.Binary; b++ {
		binAt[(b*spec.Commits)/spec.Binary]++
	}

	g.bw.WriteString("feature done\n")
	rng := newRand(spec.Seed, 5, 0, 0)
	binary := 0
	var picked []int
	for i := 0; i < spec.Commits; i++ {
		when := strconv.Itoa(baseTime+60*i) + " +0000\n"
		fmt.Fprintf(g.bw, "commit refs/heads/main\nmark :%d\n", i+1)
		g.bw.WriteString("author " + genName + " <" + genEmail + "> " + when)
		g.bw.WriteString("committer " + genName + " <" + genEmail + "> " + when)
		msg := fmt.Sprintf("Update %s %s\n\nChange %d.\n", word(rng), word(rng), i)
		fmt.Fprintf(g.bw, "data %d\n%s", len(msg), msg)

		picked = picked[:0]
		for f := 0; f < spec.FilesPerCommit; f++ {
			k := -1
			if len(g.paths) >= 2*spec.FilesPerCommit && rng.IntN(3) != 0 {
				// Modify an existing path, not one already changed by this
				// commit (that blob would be unreachable) nor a secret's.
				for try := 0; try < 8; try++ {
					c := rng.IntN(len(g.paths))
					if !contains(picked, c) && !g.secretPaths[g.paths[c].path] {
						k = c
						break
					}
				}
			}
			if k < 0 {
				k = g.newPath()
			}
			picked = append(picked, k)
			p := &g.paths[k]
			g.buf = appendContent(g.buf[:0], spec.Seed, k, p.path, p.kind, p.version, p.size)
			p.version++
			g.file("100644", p.path, g.buf)
		}
		for _, s := range secrets[i] {
			g.file("100644", s.Path, []byte(s.Content))
		}
		for n := binAt[i]; n > 0; n-- {
			r := newRand(spec.Seed, 6, uint64(binary), 0)
			g.buf = appendBinary(g.buf[:0], r, spec.BlobSize/2+r.IntN(spec.BlobSize+1))
			g.file("100644", fmt.Sprintf("assets/bin/blob_%04d.bin", binary), g.buf)
			binary++
		}
		g.bw.WriteString("\n")
	}

	for k := 0; k < spec.Refs-1; k++ {
		mark := ((k+1)*spec.Commits)/spec.Refs - 1
		if mark < 0 {
			mark = 0
		}
		mark++ // marks are 1-based
		switch k % 3 {
		case 0:
			fmt.Fprintf(g.bw, "reset refs/heads/branch-%04d\nfrom :%d\n\n", k, mark)
		case 1:
			fmt.Fprintf(g.bw, "reset refs/tags/t%04d\nfrom :%d\n\n", k, mark)
		default:
			msg := fmt.Sprintf("Release %d\n", k)
			fmt.Fprintf(g.bw, "tag v%04d\nfrom :%d\ntagger %s <%s> %d +0000\ndata %d\n%s\n",
				k, mark, genName, genEmail, baseTime+60*(mark-1)+30, len(msg), msg)
		}
	}
	g.bw.WriteString("done\n")
	g.info.paths = len(g.paths)
	return g.info, g.bw.Flush()
}

func contains(s []int, x int) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

func (g *generator) newPath() int {
	for {
		k := len(g.paths)
		p, kind := pathFor(g.spec.Seed, k)
		g.paths = append(g.paths, genPath{path: p, kind: kind, size: fileSize(g.spec.Seed, k, g.spec.BlobSize)})
		if !g.secretPaths[p] {
			return k
		}
	}
}

// file writes one inline file modification and accounts for its blob.
func (g *generator) file(mode, path string, content []byte) {
	g.bw.WriteString("M " + mode + " inline " + path + "\ndata ")
	g.bw.WriteString(strconv.Itoa(len(content)))
	g.bw.WriteByte('\n')
	g.bw.Write(content)
	g.bw.WriteByte('\n')

	h := sha1.New()
	g.hdr = append(g.hdr[:0], "blob "...)
	g.hdr = strconv.AppendInt(g.hdr, int64(len(content)), 10)
	g.hdr = append(g.hdr, 0)
	h.Write(g.hdr)
	h.Write(content)
	var sum [sha1.Size]byte
	h.Sum(sum[:0])
	if _, ok := g.seen[sum]; !ok {
		g.seen[sum] = struct{}{}
		g.info.blobs++
		g.info.blobBytes += int64(len(content))
	}
}

// Generate creates a bare repository at dir (which must not exist or be
// empty) holding the repository spec describes, and returns its Info.
func Generate(dir string, spec Spec) (Info, error) {
	if err := spec.validate(); err != nil {
		return Info{}, err
	}
	if ents, err := os.ReadDir(dir); err == nil && len(ents) > 0 {
		return Info{}, fmt.Errorf("repogen: %s is not empty", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return Info{}, err
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return Info{}, err
	}
	if _, err := gittest.Run(dir, nil, "init", "--quiet", "--bare", "--initial-branch=main"); err != nil {
		return Info{}, err
	}

	marks := filepath.Join(dir, "repogen-marks")
	pr, pw := io.Pipe()
	done := make(chan struct{})
	var si streamInfo
	var serr error
	go func() {
		defer close(done)
		si, serr = stream(pw, spec)
		pw.CloseWithError(serr)
	}()
	_, err = gittest.Run(dir, pr, "fast-import", "--quiet", "--export-marks="+marks)
	pr.CloseWithError(errors.New("fast-import ended"))
	<-done
	if serr != nil {
		return Info{}, serr
	}
	if err != nil {
		return Info{}, err
	}

	info := Info{
		Commits:   make([]string, spec.Commits),
		Refs:      make(map[string]string, spec.Refs+1),
		Blobs:     si.blobs,
		BlobBytes: si.blobBytes,
		Paths:     si.paths,
	}
	mb, err := os.ReadFile(marks)
	if err != nil {
		return Info{}, err
	}
	os.Remove(marks)
	for _, line := range bytes.Split(mb, []byte{'\n'}) {
		m, h, ok := bytes.Cut(line, []byte{' '})
		if !ok || len(m) < 2 || m[0] != ':' {
			continue
		}
		n, err := strconv.Atoi(string(m[1:]))
		if err != nil || n < 1 || n > spec.Commits {
			return Info{}, fmt.Errorf("repogen: unexpected mark %q", line)
		}
		info.Commits[n-1] = string(h)
	}
	for i, c := range info.Commits {
		if c == "" {
			return Info{}, fmt.Errorf("repogen: no mark for commit %d", i)
		}
	}
	info.Head = info.Commits[spec.Commits-1]

	out, err := gittest.Run(dir, nil, "for-each-ref", "--format=%(refname) %(objectname) %(*objectname)")
	if err != nil {
		return Info{}, err
	}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		h := f[1]
		if len(f) == 3 {
			h = f[2] // annotated tag, peeled
		}
		info.Refs[f[0]] = h
	}
	return info, nil
}

// AddEditHistory adds a branch "edits" of versions commits to the bare
// repository at dir, each editing one line of every one of files text files
// of 150 lines: generated content changes each file only a few times, these
// give a repack (git repack -adf --depth=50) long delta chains to test.
func AddEditHistory(dir string, files, versions int) error {
	rng := rand.New(rand.NewPCG(uint64(files), uint64(versions)))
	lines := make([][]string, files)
	for f := range lines {
		for i := 0; i < 150; i++ {
			lines[f] = append(lines[f], fmt.Sprintf("line %d of file %d: %x", i, f, rng.Uint64()))
		}
	}
	var stream bytes.Buffer
	for v := 0; v < versions; v++ {
		fmt.Fprintf(&stream, "commit refs/heads/edits\ncommitter A <a@example.invalid> %d +0000\ndata 5\nedit\n", 1600000000+v)
		for f := range lines {
			lines[f][rng.IntN(len(lines[f]))] = fmt.Sprintf("edited in version %d: %x", v, rng.Uint64())
			content := strings.Join(lines[f], "\n") + "\n"
			fmt.Fprintf(&stream, "M 100644 inline edits/file%d.txt\ndata %d\n%s\n", f, len(content), content)
		}
	}
	if _, err := gittest.Run(dir, &stream, "fast-import", "--quiet"); err != nil {
		return fmt.Errorf("repogen: %w", err)
	}
	return nil
}
