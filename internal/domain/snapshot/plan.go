package snapshot

// Planner decides where each runner pulls a snapshot from, so that the
// registry sends about one copy of the image whatever the fleet size: while
// no runner holds the image, at most RegistrySlots runners pull from the
// registry; once one does, new pulls come from runners that are ready, each
// serving at most Fanout pulls at a time, so copies spread as a tree. The
// registry stays every pull's fallback (a peer that fails or serves a wrong
// digest is skipped), which only costs egress when something broke.
//
// A pipelined propagation also makes a runner a source as soon as its own
// pull starts (Pulling): a runner serves what it has verified while it is
// still pulling, and a peer asking it for a blob it does not have yet
// waits for it, so the next level of the tree starts at once instead of a
// whole image later. A runner whose pull fails stops being a source
// (Failed); the pulls it was serving finish from the registry.
//
// A Planner is not safe for concurrent use; the propagation workflow owns
// one.
type Planner struct {
	fanout, registrySlots int
	ready                 []string // sources, in the order they became one
	serving               map[string]int
	// pulling are the sources whose own pull is in progress.
	pulling  map[string]bool
	registry int
	// pipelined: Pulling was called; sources are then filled in the order
	// they became one (breadth first), which keeps the tree shallow: each
	// level of a pipelined tree adds a hop every byte takes.
	pipelined bool
}

// Registry is the source name of the registry; peers are "peer:<id>".
const Registry = "registry"

// PeerSource names a runner as a source.
func PeerSource(runnerID string) string { return "peer:" + runnerID }

// NewPlanner returns a planner; values below 1 mean 1.
func NewPlanner(fanout, registrySlots int) *Planner {
	return &Planner{fanout: max(fanout, 1), registrySlots: max(registrySlots, 1), serving: map[string]int{}, pulling: map[string]bool{}}
}

// Ready records that a runner holds the image and may serve it.
func (p *Planner) Ready(runnerID string) {
	delete(p.pulling, runnerID)
	if _, ok := p.serving[runnerID]; ok {
		return
	}
	p.serving[runnerID] = 0
	p.ready = append(p.ready, runnerID)
}

// Pulling records that a runner's pull started: it serves what it has
// verified as it goes (pipelined propagation).
func (p *Planner) Pulling(runnerID string) {
	if _, ok := p.serving[runnerID]; ok {
		return
	}
	p.pipelined = true
	p.pulling[runnerID] = true
	p.serving[runnerID] = 0
	p.ready = append(p.ready, runnerID)
}

// Failed records that a runner's pull failed: a runner that was a source
// only while pulling is one no longer. A ready runner stays one.
func (p *Planner) Failed(runnerID string) {
	if !p.pulling[runnerID] {
		return
	}
	delete(p.pulling, runnerID)
	delete(p.serving, runnerID)
	for i, id := range p.ready {
		if id == runnerID {
			p.ready = append(p.ready[:i:i], p.ready[i+1:]...)
			break
		}
	}
}

// Assign picks the source of the next pull: a ready runner's id, or ""
// for the registry. ok is false when every source is busy: wait for a pull
// to finish (Release) and ask again.
func (p *Planner) Assign() (peer string, ok bool) {
	if len(p.ready) == 0 {
		if p.registry >= p.registrySlots {
			return "", false
		}
		p.registry++
		return "", true
	}
	best := ""
	for _, id := range p.ready {
		if n := p.serving[id]; n < p.fanout && (best == "" || n < p.serving[best]) {
			best = id
			if p.pipelined {
				break
			}
		}
	}
	if best == "" {
		return "", false
	}
	p.serving[best]++
	return best, true
}

// Release returns the source of a finished pull.
func (p *Planner) Release(peer string) {
	if peer == "" {
		p.registry--
		return
	}
	if p.serving[peer] > 0 {
		p.serving[peer]--
	}
}
