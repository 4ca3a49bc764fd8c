package main

import (
	"bufio"
	"errors"
	"math"
	"os"
	"regexp"
	"strings"
	"time"
	"unicode"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/utils/diff"
	"github.com/sergi/go-diff/diffmatchpatch"

	"gitfleet/internal/domain/report"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/store"
)

// gitleaksDetails reads, at export time, what `gitleaks git` reports of a
// finding and gitfleet does not keep (see report.GitleaksDetail): the
// commit's author, date and message, and the columns and entropy, which
// need the content. It reads each repository where this host has it: a
// local scan target's path, or the mirror under GITFLEET_MIRROR_DIR (a
// starter run beside a worker). The secret is read to measure it, never
// kept or written.
type gitleaksDetails struct {
	mirrorDir string
	regexes   map[string]*regexp.Regexp
	repos     map[int64]*git.Repository // by shard; nil: not readable here
	missing   map[int64]string          // the repositories not readable, by shard
}

func newGitleaksDetails(mirrorDir string, rs *scan.RuleSet) *gitleaksDetails {
	d := &gitleaksDetails{mirrorDir: mirrorDir, regexes: map[string]*regexp.Regexp{}, repos: map[int64]*git.Repository{},
		missing: map[int64]string{}}
	for _, r := range rs.Rules() {
		if re, err := regexp.Compile(r.Regex); err == nil && r.Regex != "" {
			d.regexes[r.ID] = re
		}
	}
	return d
}

// repo opens a repository's Git data once.
func (d *gitleaksDetails) repo(r store.FleetRepository) *git.Repository {
	if repo, ok := d.repos[r.ShardID]; ok {
		return repo
	}
	var repo *git.Repository
	if r.Local {
		repo, _ = git.PlainOpenWithOptions(r.Location, &git.PlainOpenOptions{DetectDotGit: true})
	} else if fi, err := os.Stat(d.mirrorDir); err == nil && fi.IsDir() {
		if m, err := mirror.New(d.mirrorDir, nil); err == nil {
			repo, _ = m.Open(r.Location)
		}
	}
	d.repos[r.ShardID] = repo
	if repo == nil {
		d.missing[r.ShardID] = r.Repository
	}
	return repo
}

// detail is what gitleaks says of occurrence o of repository r, or nil
// when it cannot be read here (or gitleaks reports it otherwise: a secret
// found in decoded text or in an archive, a path-only rule's file).
func (d *gitleaksDetails) detail(r store.FleetRepository, o store.Occurrence) *report.GitleaksDetail {
	if o.Decoded != "" || o.Archive != "" || o.SecretHash == "" || o.End <= o.Start {
		return nil
	}
	repo := d.repo(r)
	if repo == nil {
		return nil
	}
	c, err := repo.CommitObject(plumbing.NewHash(o.Commit))
	if err != nil {
		return nil
	}
	content, ok := fileAt(c, o.Path)
	if !ok || o.End > len(content) {
		return nil
	}
	var before string
	if p, err := c.Parent(0); err == nil {
		before, _ = fileAt(p, o.Path)
	} else if !errors.Is(err, object.ErrParentNotFound) {
		return nil
	}
	out := &report.GitleaksDetail{Entropy: float32(shannonEntropy(content[o.Start:o.End])),
		Author: c.Author.Name, Email: c.Author.Email, Date: c.Author.When.UTC().Format(time.RFC3339), Message: gitLogMessage(c.Message)}
	// The fragment gitleaks scanned: the run of lines the commit added
	// around the secret's (git log -p -U0), at its first line.
	lines := strings.SplitAfter(content, "\n")
	first, last := addedRun(before, content, o.Line)
	if first < 1 || last > len(lines) {
		return nil
	}
	startOff := 0
	for _, l := range lines[:first-1] {
		startOff += len(l)
	}
	raw := strings.Join(lines[first-1:last], "")
	ms, me := o.Start-startOff, o.End-startOff
	if ms < 0 || me > len(raw) {
		return nil
	}
	if re := d.regexes[o.RuleID]; re != nil { // the match holding the secret
		for _, m := range re.FindAllStringIndex(raw, -1) {
			if m[0] <= ms && me <= m[1] {
				// gitleaks trims newlines off the match and keeps its start.
				ms, me = m[0], m[0]+len(strings.Trim(raw[m[0]:m[1]], "\n"))
				break
			}
		}
	}
	startLine, endLine, startCol, endCol := gitleaksLocation(raw, ms, me)
	if first+startLine != o.Line {
		return nil
	}
	out.EndLine, out.StartColumn, out.EndColumn = first+endLine, startCol, endCol
	return out
}

// fileAt is the content of path in commit c.
func fileAt(c *object.Commit, path string) (string, bool) {
	f, err := c.File(path)
	if err != nil {
		return "", false
	}
	s, err := f.Contents()
	return s, err == nil
}

// addedRun is the run of consecutive lines of after, around line, that a
// diff from before adds (the -U0 hunk gitleaks scans); the whole file when
// it is new. 0, 0 when the commit does not add line.
func addedRun(before, after string, line int) (first, last int) {
	if before == "" {
		return 1, strings.Count(after, "\n") + boolInt(!strings.HasSuffix(after, "\n") && after != "")
	}
	added := map[int]bool{}
	n := 0
	for _, d := range diff.Do(before, after) {
		count := strings.Count(d.Text, "\n") + boolInt(!strings.HasSuffix(d.Text, "\n") && d.Text != "")
		switch d.Type {
		case diffmatchpatch.DiffEqual:
			n += count
		case diffmatchpatch.DiffInsert:
			for i := 1; i <= count; i++ {
				added[n+i] = true
			}
			n += count
		}
	}
	if !added[line] {
		return 0, 0
	}
	first, last = line, line
	for added[first-1] {
		first--
	}
	for added[last+1] {
		last++
	}
	return first, last
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// gitleaksLocation is gitleaks' location of the match [start, end) in a
// fragment (detect/location.go, v8.30): 0-based lines, and columns as it
// counts them — 1-based on the fragment's first line, one more on the
// others (it counts from the newline before the line).
func gitleaksLocation(raw string, start, end int) (startLine, endLine, startCol, endCol int) {
	var nl []int
	for i := 0; i < len(raw); i++ {
		if raw[i] == '\n' {
			nl = append(nl, i)
		}
	}
	if len(nl) == 0 {
		nl = []int{len(raw)}
	}
	prev, set, lineNum := 0, false, 0
	for ln, idx := range nl {
		lineNum = ln
		if prev <= start && start < idx {
			set = true
			startLine, endLine, startCol = ln, ln, start-prev+1
		}
		if prev < end && end <= idx {
			endLine, endCol = ln, end-prev
		}
		prev = idx
	}
	if !set {
		startCol, endCol = start-prev+1, end-prev
		startLine, endLine = lineNum+1, lineNum+1
	}
	return startLine, endLine, startCol, endCol
}

// shannonEntropy is gitleaks' entropy of a secret (bits per character).
func shannonEntropy(data string) float64 {
	if data == "" {
		return 0
	}
	counts := map[rune]int{}
	for _, c := range data {
		counts[c]++
	}
	inv := 1.0 / float64(len(data))
	e := 0.0
	for _, n := range counts {
		f := float64(n) * inv
		e -= f * math.Log2(f)
	}
	return e
}

// gitLogMessage is a commit message as gitleaks reads it from `git log`
// (go-gitdiff's PatchHeader.Message): the first paragraph's lines trimmed
// and joined by spaces, then a blank line and the rest, each line's
// trailing space removed and runs of blank lines made one.
func gitLogMessage(msg string) string {
	s := bufio.NewScanner(strings.NewReader(msg))
	var title strings.Builder
	for s.Scan() {
		t := strings.TrimSpace(s.Text())
		if t == "" {
			if title.Len() == 0 {
				continue
			}
			break
		}
		if title.Len() > 0 {
			title.WriteByte(' ')
		}
		title.WriteString(t)
	}
	var body strings.Builder
	empty := 0
	for s.Scan() {
		line := strings.TrimRightFunc(s.Text(), unicode.IsSpace)
		if line == "" {
			empty++
			continue
		}
		if body.Len() > 0 {
			body.WriteByte('\n')
			if empty > 0 {
				body.WriteByte('\n')
			}
		}
		empty = 0
		body.WriteString(line)
	}
	if body.Len() == 0 {
		return title.String()
	}
	return title.String() + "\n\n" + body.String()
}
