package gitread

import (
	"math/bits"
	"sync"
)

// bufPool recycles object buffers between the indexer's goroutines: one
// stack per power-of-two size class, each bounded in bytes, and all of them
// together bounded too (a pack's objects spread over many classes, and
// what the pool keeps is memory the process holds). Buffers over the
// largest class are not pooled.
type bufPool struct {
	mu      sync.Mutex
	classes [maxClass + 1][][]byte
	held    int // bytes in all classes
}

const (
	minClass       = 6  // 64 bytes
	maxClass       = 24 // 16 MiB
	poolClassBytes = 2 << 20
	poolBytes      = 2 << 20
)

func sizeClass(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// get returns a buffer of n bytes (its content is garbage).
func (p *bufPool) get(n int) []byte {
	c := sizeClass(n)
	if c > maxClass {
		return make([]byte, n)
	}
	p.mu.Lock()
	s := p.classes[c]
	if len(s) > 0 {
		b := s[len(s)-1]
		s[len(s)-1] = nil
		p.classes[c] = s[:len(s)-1]
		p.held -= cap(b)
		p.mu.Unlock()
		return b[:n]
	}
	p.mu.Unlock()
	return make([]byte, n, 1<<c)
}

// put gives b back. Buffers not from get (or grown) are left to the GC.
func (p *bufPool) put(b []byte) {
	c := sizeClass(cap(b))
	if b == nil || c > maxClass || cap(b) != 1<<c {
		return
	}
	p.mu.Lock()
	if ((len(p.classes[c])+1)<<c <= poolClassBytes && p.held+cap(b) <= poolBytes) || len(p.classes[c]) < 2 {
		p.classes[c] = append(p.classes[c], b[:0])
		p.held += cap(b)
	}
	p.mu.Unlock()
}

// objCache holds resolved objects by entry index, to serve as delta bases:
// least recently used out first, within max bytes (pinned entries are kept
// beyond it). It owns the buffers put in it and gives them back to the pool
// when they are evicted. Not safe for concurrent use.
type objCache struct {
	pool  *bufPool
	max   int
	used  int
	m     map[int32]*cached
	queue []lruEntry // oldest first; stale when seq differs from the entry's
	head  int
	seq   uint64
}

type cached struct {
	data []byte
	pins int
	seq  uint64
}

type lruEntry struct {
	idx int32
	seq uint64
}

func newObjCache(pool *bufPool, max int) *objCache {
	return &objCache{pool: pool, max: max, m: map[int32]*cached{}}
}

// touch makes e the most recently used.
func (c *objCache) touch(i int32, e *cached) {
	c.seq++
	e.seq = c.seq
	c.queue = append(c.queue, lruEntry{i, c.seq})
}

// getPinned returns entry i pinned (not evicted until unpin), or nil.
func (c *objCache) getPinned(i int32) []byte {
	if e := c.m[i]; e != nil {
		e.pins++
		c.touch(i, e)
		return e.data
	}
	return nil
}

func (c *objCache) unpin(i int32) {
	if e := c.m[i]; e != nil && e.pins > 0 {
		e.pins--
	}
}

// put stores data (which the cache now owns) as entry i, pinned if asked,
// and evicts the least recently used unpinned entries beyond the cache's
// bytes.
func (c *objCache) put(i int32, data []byte, pinned bool) {
	if e := c.m[i]; e != nil {
		c.pool.put(data) // already cached: the same content
		if pinned {
			e.pins++
		}
		c.touch(i, e)
		return
	}
	e := &cached{data: data}
	if pinned {
		e.pins = 1
	}
	c.m[i] = e
	c.used += cap(data)
	c.touch(i, e)
	c.trim()
}

func (c *objCache) trim() {
	for tries := len(c.queue) - c.head; c.used > c.max && tries > 0; tries-- {
		q := c.queue[c.head]
		c.head++
		e := c.m[q.idx]
		if e == nil || e.seq != q.seq {
			continue // stale
		}
		if e.pins > 0 {
			c.touch(q.idx, e) // to the back
			continue
		}
		delete(c.m, q.idx)
		c.used -= cap(e.data)
		c.pool.put(e.data)
	}
	if c.head > 1024 && c.head > len(c.queue)/2 {
		n := copy(c.queue, c.queue[c.head:])
		c.queue, c.head = c.queue[:n], 0
	}
	if len(c.queue)-c.head > 4*len(c.m)+1024 {
		c.compact()
	}
}

// compact drops the stale queue entries.
func (c *objCache) compact() {
	live := c.queue[:0]
	for _, q := range c.queue[c.head:] {
		if e := c.m[q.idx]; e != nil && e.seq == q.seq {
			live = append(live, q)
		}
	}
	c.queue, c.head = live, 0
}

// clear gives every buffer back.
func (c *objCache) clear() {
	for i, e := range c.m {
		c.pool.put(e.data)
		delete(c.m, i)
	}
	c.queue, c.head, c.used = c.queue[:0], 0, 0
}

// budget bounds the bytes of inflated objects on their way from the
// parsing goroutine to the resolving one.
type budget struct {
	mu      sync.Mutex
	cond    sync.Cond
	used    int64
	max     int64
	stopped bool
}

func newBudget(max int64) *budget {
	b := &budget{max: max}
	b.cond.L = &b.mu
	return b
}

// acquire waits for n bytes (any amount when nothing is in use) and
// reports false once stopped.
func (b *budget) acquire(n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	for b.used > 0 && b.used+n > b.max && !b.stopped {
		b.cond.Wait()
	}
	if b.stopped {
		return false
	}
	b.used += n
	return true
}

func (b *budget) release(n int64) {
	b.mu.Lock()
	b.used -= n
	b.mu.Unlock()
	b.cond.Broadcast()
}

func (b *budget) stop() {
	b.mu.Lock()
	b.stopped = true
	b.mu.Unlock()
	b.cond.Broadcast()
}
