package scan

// keywordMatcher finds every occurrence of a set of lower-case keywords in a
// blob, ASCII case-insensitively, in one pass and without copying the blob:
// an Aho–Corasick automaton compiled to a dense DFA over byte classes (bytes
// that occur in no keyword share class 0; an upper-case ASCII letter shares
// its lower-case letter's class, which is how the blob is "lower-cased").
//
// States are numbered so that every state that ends a keyword comes after
// every state that does not; the hot loop is one table load and one compare
// per byte.
type keywordMatcher struct {
	class    [256]uint8
	nclass   uint32
	trans    []uint32 // [state*nclass + class] -> next state * nclass
	outStart uint32   // states*nclass >= outStart have outputs
	outs     [][]int32
	kwLen    []int
}

func newKeywordMatcher(kws []string) *keywordMatcher {
	m := &keywordMatcher{kwLen: make([]int, len(kws))}
	// Byte classes.
	next := uint8(1)
	for _, k := range kws {
		for i := 0; i < len(k); i++ {
			c := lowerByte(k[i])
			if m.class[c] == 0 {
				m.class[c] = next
				next++
			}
		}
	}
	for c := 'A'; c <= 'Z'; c++ {
		m.class[c] = m.class[c+('a'-'A')]
	}
	nc := int(next)
	m.nclass = uint32(nc)

	// Trie.
	type node struct {
		next []int32
		fail int32
		out  []int32
	}
	newNode := func() node {
		n := node{next: make([]int32, nc)}
		for i := range n.next {
			n.next[i] = -1
		}
		return n
	}
	nodes := []node{newNode()}
	for id, k := range kws {
		m.kwLen[id] = len(k)
		s := int32(0)
		for i := 0; i < len(k); i++ {
			c := m.class[k[i]]
			if nodes[s].next[c] < 0 {
				nodes[s].next[c] = int32(len(nodes))
				nodes = append(nodes, newNode())
			}
			s = nodes[s].next[c]
		}
		nodes[s].out = append(nodes[s].out, int32(id))
	}

	// Failure links, outputs and the full DFA, breadth first.
	queue := make([]int32, 0, len(nodes))
	for c := 0; c < nc; c++ {
		if t := nodes[0].next[c]; t < 0 {
			nodes[0].next[c] = 0
		} else {
			nodes[t].fail = 0
			queue = append(queue, t)
		}
	}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		f := nodes[s].fail
		nodes[s].out = append(nodes[s].out, nodes[f].out...)
		for c := 0; c < nc; c++ {
			t := nodes[s].next[c]
			if t < 0 {
				nodes[s].next[c] = nodes[f].next[c]
				continue
			}
			nodes[t].fail = nodes[f].next[c]
			queue = append(queue, t)
		}
	}

	// Renumber: states without outputs first (the root stays 0).
	perm := make([]uint32, len(nodes))
	n := uint32(0)
	for i := range nodes {
		if len(nodes[i].out) == 0 {
			perm[i] = n
			n++
		}
	}
	m.outStart = n * uint32(nc)
	for i := range nodes {
		if len(nodes[i].out) > 0 {
			perm[i] = n
			n++
		}
	}
	m.trans = make([]uint32, len(nodes)*nc)
	m.outs = make([][]int32, len(nodes))
	for i := range nodes {
		row := perm[i] * uint32(nc)
		for c := 0; c < nc; c++ {
			m.trans[row+uint32(c)] = perm[nodes[i].next[c]] * uint32(nc)
		}
		m.outs[perm[i]] = nodes[i].out
	}
	return m
}

// contains reports whether s holds one of the keywords.
func contains[T string | []byte](m *keywordMatcher, s T) bool {
	st := uint32(0)
	for i := 0; i < len(s); i++ {
		if st = m.trans[st+uint32(m.class[s[i]])]; st >= m.outStart {
			return true
		}
	}
	return false
}

// scan calls hit(state, i) for every position i at which at least one
// keyword ends; outputs(state) lists them.
func (m *keywordMatcher) scan(data []byte, sc *scratch) {
	trans, class, outStart := m.trans, &m.class, m.outStart
	s := uint32(0)
	for i, b := range data {
		s = trans[s+uint32(class[b])]
		if s >= outStart {
			sc.keywordHit(m.outs[s/m.nclass], i)
		}
	}
}
