package gitread

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/go-git/go-git/v5/plumbing"
)

// resolve resolves the deltas the stream left: from each resolved object
// with unresolved deltas on it, down their delta trees, on several
// goroutines. The bases a thin pack lacks are then appended to the pack
// and their trees resolved.
func (x *Indexer) resolve(ix *Index) error {
	n := len(x.entries)
	g := &graph{x: x, claimed: make([]atomic.Bool, n)}
	// Entries refused in the stream are nobody's children: never resolved.
	for i := range g.claimed {
		if x.entries[i].otyp == 0 && x.refused.get(int32(i)) != nil {
			g.claimed[i].Store(true)
		}
	}
	// Children of each entry by offset (CSR), for the unresolved OFS_DELTAs.
	g.ofsStart = make([]int32, n+1)
	for i := range x.entries {
		e := &x.entries[i]
		if e.typ == TypeOfsDelta && e.otyp == 0 && e.base >= 0 {
			g.ofsStart[e.base+1]++
		}
	}
	for i := 0; i < n; i++ {
		g.ofsStart[i+1] += g.ofsStart[i]
	}
	g.ofsKids = make([]int32, g.ofsStart[n])
	// ofsStart[b] is base b's cursor while filling; it ends at b's end,
	// which is b+1's start: shifting the table by one restores the starts
	// (no second table of n cursors).
	for i := range x.entries {
		e := &x.entries[i]
		if e.typ == TypeOfsDelta && e.otyp == 0 && e.base >= 0 {
			g.ofsKids[g.ofsStart[e.base]] = int32(i)
			g.ofsStart[e.base]++
		}
	}
	copy(g.ofsStart[1:], g.ofsStart[:n])
	g.ofsStart[0] = 0
	if len(x.refs) > 0 {
		g.refKids = make(map[plumbing.Hash][]int32, len(x.refs))
		for _, r := range x.refs {
			g.refKids[r.base] = append(g.refKids[r.base], r.idx)
		}
	}
	var roots []int32
	for i := range x.entries {
		if x.entries[i].otyp != 0 && g.hasKids(int32(i)) {
			roots = append(roots, int32(i))
		}
	}
	if err := g.run(roots); err != nil {
		return err
	}
	if left := x.unresolved(); left > 0 {
		roots, _, err := x.fixThin(g, ix)
		if err != nil {
			return err
		}
		if err := g.run(roots); err != nil {
			return err
		}
		// What is left never resolves (a cycle, a base refused or not
		// found): refused, with the rest of the pack indexed.
		x.refuseRest()
	}
	return nil
}

// unresolved counts the deltas neither resolved nor refused.
func (x *Indexer) unresolved() int {
	left := 0
	for i := range x.entries {
		if x.entries[i].otyp == 0 && x.refused.get(int32(i)) == nil {
			left++
		}
	}
	return left
}

// graph is the delta forest of the deltas left after the stream.
type graph struct {
	x        *Indexer
	ofsStart []int32 // ofsKids[ofsStart[i]:ofsStart[i+1]] have base i
	ofsKids  []int32
	refKids  map[plumbing.Hash][]int32 // by base name
	claimed  []atomic.Bool             // a delta is resolved by whoever claims it

	next  atomic.Int64
	errMu sync.Mutex
	err   error
	stop  atomic.Bool
}

func (g *graph) kids(i int32) ([]int32, []int32) {
	ofs := g.ofsKids[g.ofsStart[i]:g.ofsStart[i+1]]
	var ref []int32
	if g.refKids != nil {
		ref = g.refKids[g.x.entries[i].hash]
	}
	return ofs, ref
}

func (g *graph) hasKids(i int32) bool {
	ofs, ref := g.kids(i)
	return len(ofs)+len(ref) > 0
}

func (g *graph) fail(err error) {
	g.errMu.Lock()
	if g.err == nil {
		g.err = err
	}
	g.errMu.Unlock()
	g.stop.Store(true)
}

// run resolves the trees under roots on the workers.
func (g *graph) run(roots []int32) error {
	if len(roots) == 0 {
		return nil
	}
	workers := g.x.opts.Workers
	if workers <= 0 {
		workers = min(runtime.GOMAXPROCS(0), maxWorkers)
	}
	workers = max(1, min(workers, len(roots)))
	g.next.Store(0)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newWorker(g)
			defer w.close()
			for !g.stop.Load() {
				k := g.next.Add(1) - 1
				if k >= int64(len(roots)) {
					return
				}
				err := w.tree(roots[k])
				w.hold(-1, nil) // the tree's last base: not kept for the next tree
				if w.gate {
					// The tree's big objects go with the gate.
					w.cache.clear()
					w.gate.release()
				}
				if err != nil {
					g.fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return g.err
}

// worker resolves delta trees, reading the pack file.
type worker struct {
	g *graph
	x *Indexer
	// r reads the entries of the pack being indexed (no index yet: by
	// offset only).
	r     *PackReader
	cache *objCache
	h     *hasher
	delta []byte
	chain []int32
	stack []frame
	// gate is held from the first object over gateBytes the worker
	// materializes to the end of its delta tree.
	gate gateHold
	// held is the last object resolved that has deltas on it and is too
	// large for the cache (heldIdx its entry; -1: none): the base of the
	// next deltas down the tree. Without it each level of a chain of large
	// objects rebuilt every level below it again.
	held    []byte
	heldIdx int32
	stop    chan struct{} // never closed: the graph's stop flag ends the work
}

type frame struct {
	node     int32
	ofs, ref []int32
	next     int
}

func newWorker(g *graph) *worker {
	w := &worker{g: g, x: g.x, h: newHasher(), heldIdx: -1}
	// The indexer checks and counts what the worker resolves itself.
	w.r = (&Packs{packs: []*pack{{f: g.x.f, end: g.x.end}}, lim: g.x.lim}).newReader(0, 0)
	w.cache = newObjCache(&g.x.pool, workerCacheBytes)
	return w
}

func (w *worker) close() {
	w.cache.clear()
	w.hold(-1, nil)
	w.gate.release()
}

// hold makes data, entry i's, the held object, giving the previous one
// back.
func (w *worker) hold(i int32, data []byte) {
	w.x.pool.put(w.held)
	w.held, w.heldIdx = data, i
}

// tree resolves the unresolved deltas under root, depth first.
func (w *worker) tree(root int32) error {
	w.stack = w.stack[:0]
	w.push(root)
	for len(w.stack) > 0 {
		if w.g.stop.Load() {
			return nil
		}
		f := &w.stack[len(w.stack)-1]
		var k int32
		switch {
		case f.next < len(f.ofs):
			k = f.ofs[f.next]
		case f.next < len(f.ofs)+len(f.ref):
			k = f.ref[f.next-len(f.ofs)]
		default:
			w.stack = w.stack[:len(w.stack)-1]
			continue
		}
		f.next++
		if !w.g.claimed[k].CompareAndSwap(false, true) {
			continue
		}
		node := f.node
		base, err := w.acquire(node)
		if l := asLimit(err); l != nil {
			// Its base cannot be had again within the limits: k is
			// refused, and its own deltas with it (refuseRest).
			w.x.refused.add(k, l)
			continue
		}
		if err != nil {
			return err
		}
		if ofs, _ := w.g.kids(k); len(ofs) == 0 {
			// No delta on it by offset: its target is named without being
			// made, and it is a leaf unless a delta names it as its base
			// (known once it is named: then it is made as well).
			err := w.hashEntry(k, node, base)
			if l := asLimit(err); l != nil {
				w.cache.unpin(node)
				w.x.refused.add(k, l)
				continue
			}
			if err != nil {
				w.cache.unpin(node)
				return err
			}
			if !w.g.hasKids(k) {
				w.cache.unpin(node)
				continue
			}
		}
		out, err := w.applyEntry(k, base)
		w.cache.unpin(node)
		if l := asLimit(err); l != nil {
			w.x.refused.add(k, l)
			continue
		}
		if err != nil {
			return err
		}
		e := &w.x.entries[k]
		e.base = node
		e.otyp = w.x.entries[node].otyp
		e.hash = w.h.object(e.otyp, out)
		if w.g.hasKids(k) {
			if len(out) > workerCacheBytes/2 {
				w.hold(k, out) // base (node) no longer used: given back
			} else {
				w.cache.put(k, out, false)
			}
			w.push(k) // f is invalid from here
		} else {
			w.x.pool.put(out)
		}
	}
	return nil
}

func (w *worker) push(i int32) {
	ofs, ref := w.g.kids(i)
	w.stack = append(w.stack, frame{node: i, ofs: ofs, ref: ref})
}

// applyEntry inflates delta entry k and applies it to base.
func (w *worker) applyEntry(k int32, base []byte) ([]byte, error) {
	var err error
	if w.delta, err = w.inflate(k, w.delta, false); err != nil {
		return nil, err
	}
	out, err := w.x.applyDelta(base, w.delta, &w.gate, w.stop)
	if err != nil {
		return nil, fmt.Errorf("delta at offset %d: %w", w.x.entries[k].off(), err)
	}
	if cap(w.delta) > 4<<20 {
		w.delta = nil
	}
	return out, nil
}

// hashEntry inflates delta entry k and names its target on base without
// making it (no memory for the target: a delta nothing is based on is only
// named), within the limits and the pack's budget as applyDelta.
func (w *worker) hashEntry(k, node int32, base []byte) error {
	var err error
	if w.delta, err = w.inflate(k, w.delta, false); err != nil {
		return err
	}
	e := &w.x.entries[k]
	_, tgt, _, err := DeltaSizes(w.delta)
	if err == nil && tgt > uint64(w.x.lim.MaxObjectBytes) {
		err = objectLimit("delta target of %d bytes", tgt)
	}
	if err == nil {
		err = w.x.name(int64(tgt))
	}
	var h plumbing.Hash
	if err == nil {
		h, err = hashDelta(w.h, w.x.entries[node].otyp, base, w.delta)
	}
	if cap(w.delta) > 4<<20 {
		w.delta = nil
	}
	if err != nil {
		return fmt.Errorf("delta at offset %d: %w", e.off(), err)
	}
	e.base = node
	e.otyp = w.x.entries[node].otyp
	e.hash = h
	return nil
}

// inflate inflates the data of entry i (checked by the parse) into dst,
// with the package's one pack reader: its window over the pack file, its
// decoder, its zlib checks.
// With pooled, the memory comes from the pool (dst is nil).
func (w *worker) inflate(i int32, dst []byte, pooled bool) ([]byte, error) {
	off := w.x.entries[i].off()
	ce, err := w.r.parseHeader(0, off, false)
	if err != nil {
		return nil, fmt.Errorf("offset %d: reread: %w", off, err)
	}
	if ce.size > w.x.lim.MaxObjectBytes {
		// A whole object hashed as it streamed in, needed now as a base.
		return nil, objectLimit("delta base of %d bytes at offset %d", ce.size, off)
	}
	w.gate.admit(ce.size, w.stop)
	if ce.size > gateBytes {
		w.x.big.Store(true)
	}
	if pooled {
		dst = w.x.pool.get(int(ce.size))
	}
	out, err := w.r.inflate(&ce, dst)
	if err != nil {
		return nil, fmt.Errorf("offset %d: reinflate: %w", off, err)
	}
	w.r.trim()
	return out, nil
}

// acquire returns the content of resolved entry i, pinned in the cache
// until unpin: from the cache, else rebuilt from the nearest cached object
// or whole object down its delta chain.
func (w *worker) acquire(i int32) ([]byte, error) {
	if i == w.heldIdx {
		return w.held, nil
	}
	if d := w.cache.getPinned(i); d != nil {
		return d, nil
	}
	chain := w.chain[:0]
	j := i
	var base []byte
	for {
		if base = w.cache.getPinned(j); base != nil {
			break
		}
		e := &w.x.entries[j]
		if !isDelta(e.typ) {
			var err error
			if base, err = w.inflate(j, nil, true); err != nil {
				return nil, err
			}
			w.cache.put(j, base, true)
			break
		}
		chain = append(chain, j)
		if len(chain) > maxDeltaChain || e.base < 0 {
			return nil, fmt.Errorf("%w: delta chain at offset %d too long", ErrCorrupt, e.off())
		}
		j = e.base
	}
	for k := len(chain) - 1; k >= 0; k-- {
		c := chain[k]
		out, err := w.applyEntry(c, base)
		if err != nil {
			w.cache.unpin(j)
			return nil, err
		}
		w.cache.put(c, out, true)
		w.cache.unpin(j)
		base, j = out, c
	}
	w.chain = chain[:0]
	return base, nil
}
