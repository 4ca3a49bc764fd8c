package gitread

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// A Refusal is an entry of a pack that an Indexer left out of the pack's
// index: an object it could not resolve within the limits (a delta
// declaring a target over Limits.MaxObjectBytes, a delta on such an
// object, a delta beyond the pack's inflate budget, a delta whose base
// never resolves: a cycle). The rest of the pack is indexed and readable:
// one crafted object hides nothing else (issue 31). The entry stays in
// the pack, which is kept as it was received (its checksum holds); the
// refusals are written beside its index (WriteRefusals, the
// pack-<checksum>.refused file), so that OpenPacks accepts a pack holding
// more entries than its index, and an object a reader cannot find is
// told refused, with its reason, rather than missing (Packs.Refused).
type Refusal struct {
	// Offset is the entry's offset in the pack.
	Offset int64
	// Name is the object's name when the pack says it: a delta cycle's
	// members are the bases its reference deltas name. Zero otherwise: an
	// object is named by the hash of its content, which is never computed
	// (a delta's target is what it could not resolve).
	Name plumbing.Hash
	// Err is the limit it went over.
	Err *LimitError
}

// refusals are the entries an Indexer refused, by entry index (safe for
// the resolving goroutines).
type refusals struct {
	mu sync.Mutex
	m  map[int32]*LimitError
}

func (r *refusals) add(i int32, err *LimitError) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.m == nil {
		r.m = map[int32]*LimitError{}
	}
	if r.m[i] == nil {
		r.m[i] = err
	}
}

func (r *refusals) get(i int32) *LimitError {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.m[i]
}

func (r *refusals) len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.m)
}

// asLimit returns err's *LimitError when err is over a limit of one
// object (not the pack's size, which bounds the whole fetch).
func asLimit(err error) *LimitError {
	var l *LimitError
	if errors.As(err, &l) && l.What != "pack size" {
		return l
	}
	return nil
}

// refuseRest refuses, after the resolution, every delta left unresolved:
// one whose base was refused inherits its base's limit; the others' bases
// never resolve (a cycle of reference deltas, or a base neither in the
// pack nor given by IndexOptions.Base), a chain without an end. The base
// names of the unresolved reference deltas that no resolved object has
// are the names of the cycle's members: recorded as refused by name.
func (x *Indexer) refuseRest() {
	for i := range x.entries {
		e := &x.entries[i]
		if e.otyp != 0 || x.refused.get(int32(i)) != nil {
			continue
		}
		if e.typ == TypeOfsDelta && e.base >= 0 {
			// Bases precede their offset deltas: the base's refusal, if
			// any, is known by now.
			if b := x.refused.get(e.base); b != nil {
				x.refused.add(int32(i), &LimitError{What: b.What, Setting: b.Setting,
					Detail: fmt.Sprintf("delta at offset %d on the refused object at offset %d", e.off(), x.entries[e.base].off())})
				continue
			}
		}
		x.refused.add(int32(i), chainLimit("delta at offset %d: its base never resolves (a delta cycle, or a base neither in the pack nor in the repository)", e.off()).(*LimitError))
	}
	if len(x.refs) == 0 {
		return
	}
	have := make(map[plumbing.Hash]bool, len(x.entries))
	for i := range x.entries {
		if x.entries[i].otyp != 0 {
			have[x.entries[i].hash] = true
		}
	}
	x.refusedNames = map[plumbing.Hash]*LimitError{}
	for _, r := range x.refs {
		if l := x.refused.get(r.idx); l != nil && !have[r.base] && x.refusedNames[r.base] == nil {
			x.refusedNames[r.base] = l
		}
	}
}

// bigDeclaredBytes: a delta declaring a larger target is resolved after
// the stream, once the pack's declared sizes are known (checkDeclared),
// and its declared size kept by entry until then.
const bigDeclaredBytes = 1 << 20

// declare records the target size delta entry i declares, left for after
// the stream.
func (x *Indexer) declare(i int32, size int64) {
	if size <= bigDeclaredBytes {
		x.smallDeclared += size
		return
	}
	if x.bigDeclared == nil {
		x.bigDeclared = map[int32]int64{}
	}
	x.bigDeclared[i] = size
}

// checkDeclared checks, before any delta left after the stream is
// resolved, what the pack declares against its inflate budget: the objects
// named so far and the target sizes the deltas left declare in their
// headers. Over it, the deltas declaring the largest targets (the first in
// the pack among equals) are refused, "inflated size", until the rest
// fits: their targets, and the deltas on them, are never allocated nor
// computed. (Before, each level was resolved, allocated and counted until
// the budget ran out: a pack of 403 bytes declaring four levels of
// 239 MiB cost 496 MiB and 12.8 s before its refusal.) An honest pack
// never comes near the budget; resolving still counts what it actually
// names (name), which bounds what rebuilding bases costs.
func (x *Indexer) checkDeclared() {
	budget := x.lim.inflateBudget(x.recv.Load())
	total := x.named.Load() + x.smallDeclared
	big := make([]int32, 0, len(x.bigDeclared))
	for i, n := range x.bigDeclared {
		total += n
		big = append(big, i)
	}
	if total <= budget {
		return
	}
	slices.SortFunc(big, func(a, b int32) int {
		if c := cmpInt(x.bigDeclared[b], x.bigDeclared[a]); c != 0 {
			return c
		}
		return cmpInt(x.entries[a].off(), x.entries[b].off())
	})
	// The deltas on each one left, by offset: a refused delta takes them
	// along (refuseRest), and what they declare.
	kids := map[int32][]int32{}
	for i := range x.entries {
		if e := &x.entries[i]; e.typ == TypeOfsDelta && e.otyp == 0 && e.base >= 0 {
			kids[e.base] = append(kids[e.base], int32(i))
		}
	}
	declared := total
	gone := map[int32]bool{}
	for _, i := range big {
		if total <= budget {
			break
		}
		if gone[i] {
			continue
		}
		x.refused.add(i, &LimitError{What: "inflated size", Detail: fmt.Sprintf(
			"delta at offset %d declares a target of %d bytes: a pack of %d bytes declares objects of %d bytes, more than %d",
			x.entries[i].off(), x.bigDeclared[i], x.recv.Load(), declared, budget)})
		for stack := []int32{i}; len(stack) > 0; {
			j := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			if gone[j] {
				continue
			}
			gone[j] = true
			total -= x.bigDeclared[j]
			stack = append(stack, kids[j]...)
		}
	}
}

// refusalList is the refusals in offset order, the entries' names where
// known.
func (x *Indexer) refusalList() []Refusal {
	x.refused.mu.Lock()
	defer x.refused.mu.Unlock()
	out := make([]Refusal, 0, len(x.refused.m))
	for i, l := range x.refused.m {
		out = append(out, Refusal{Offset: x.entries[i].off(), Err: l})
	}
	slices.SortFunc(out, func(a, b Refusal) int { return cmpInt(a.Offset, b.Offset) })
	// Names go to entries in the order of the names: which member of a
	// cycle has which name is unknown (and does not matter, they share
	// their reason); what matters is that every name is told refused.
	var names []plumbing.Hash
	for h := range x.refusedNames {
		names = append(names, h)
	}
	slices.SortFunc(names, func(a, b plumbing.Hash) int { return bytes.Compare(a[:], b[:]) })
	for _, h := range names {
		for k := range out {
			if out[k].Name.IsZero() && out[k].Err == x.refusedNames[h] {
				out[k].Name = h
				break
			}
		}
	}
	return out
}

// refusedMagic starts a refusals file.
const refusedMagic = "# gitfleet refused entries v1\n"

// maxRefusedBytes bounds a refusals file read (about 100 bytes a line).
const maxRefusedBytes = 64 << 20

// WriteRefusals writes the index's refusals (the pack-<checksum>.refused
// file beside its .idx): a line per refused entry, "<offset> <name, or
// -> <bound>\t<detail>".
func (ix *Index) WriteRefusals(w io.Writer) error {
	bw := bufio.NewWriter(w)
	_, _ = bw.WriteString(refusedMagic) // a bufio.Writer keeps its first error for Flush
	for _, r := range ix.Refused {
		name := "-"
		if !r.Name.IsZero() {
			name = r.Name.String()
		}
		fmt.Fprintf(bw, "%d %s %s\t%s\n", r.Offset, name, r.Err.What, strings.ReplaceAll(r.Err.Detail, "\n", " "))
	}
	return bw.Flush()
}

// readRefusals parses a refusals file.
func readRefusals(r io.Reader) ([]Refusal, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxRefusedBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRefusedBytes {
		return nil, fmt.Errorf("%w: refusals file over %d bytes", ErrCorrupt, maxRefusedBytes)
	}
	rest, ok := bytes.CutPrefix(data, []byte(refusedMagic))
	if !ok {
		return nil, fmt.Errorf("%w: not a refusals file", ErrCorrupt)
	}
	var out []Refusal
	for len(rest) > 0 {
		line, tail, ok := bytes.Cut(rest, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("%w: refusals file cut short", ErrCorrupt)
		}
		rest = tail
		head, detail, _ := strings.Cut(string(line), "\t")
		f := strings.SplitN(head, " ", 3)
		if len(f) != 3 {
			return nil, fmt.Errorf("%w: refusals file: bad line %q", ErrCorrupt, line)
		}
		off, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || off < 12 {
			return nil, fmt.Errorf("%w: refusals file: bad offset %q", ErrCorrupt, f[0])
		}
		r := Refusal{Offset: off, Err: &LimitError{What: f[2], Detail: detail}}
		if r.Err.What == "object size" {
			r.Err.Setting = SettingMaxObjectBytes
		}
		if f[1] != "-" {
			if !plumbing.IsHash(f[1]) {
				return nil, fmt.Errorf("%w: refusals file: bad name %q", ErrCorrupt, f[1])
			}
			r.Name = plumbing.NewHash(f[1])
		}
		out = append(out, r)
	}
	return out, nil
}

// Refused says why object h, which no pack's index nor the loose objects
// hold, is not there when the packs hold entries their indexer refused: a
// *LimitError (wrapping ErrLimit) naming the bound, nil otherwise. An
// object the pack named (a member of a delta cycle) gets its own entry's
// reason; another one any of the refused entries' — the missing object
// is one of them, for a repository fetched whole lacks nothing else. The
// scan records it as a hole with that reason (lost: the same data trips
// the same bound), not as missing.
func (ps *Packs) Refused(h plumbing.Hash) error {
	var anon []*LimitError
	for _, p := range ps.packs {
		for _, r := range p.refused {
			if r.Name == h {
				return r.Err
			}
			if r.Name.IsZero() {
				anon = append(anon, r.Err)
			}
		}
	}
	if len(anon) == 0 {
		return nil
	}
	var whats []string
	for _, l := range anon {
		if !slices.Contains(whats, l.What) {
			whats = append(whats, l.What)
		}
	}
	slices.Sort(whats)
	l := &LimitError{What: strings.Join(whats, " or "),
		Detail: fmt.Sprintf("object %s is not indexed: it is one of the %d entries of the packs refused when indexed", h, len(anon))}
	if len(whats) == 1 {
		l.Setting = anon[0].Setting
	}
	return l
}
