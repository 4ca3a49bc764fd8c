package snapshot

// Planner decides where each runner pulls a snapshot from, so that the
// registry sends about one copy of the image whatever the fleet size: while
// no runner holds the image, at most RegistrySlots runners pull from the
// registry; once one does, new pulls come from runners that are ready, each
// serving at most Fanout pulls at a time, so copies spread as a tree. The
// registry stays every pull's fallback (a peer that fails or serves a wrong
// digest is skipped), which only costs egress when something broke.
//
// A Planner is not safe for concurrent use; the propagation workflow owns
// one.
type Planner struct {
	fanout, registrySlots int
	ready                 []string // in the order they became ready
	serving               map[string]int
	registry              int
}

// Registry is the source name of the registry; peers are "peer:<id>".
const Registry = "registry"

// PeerSource names a runner as a source.
func PeerSource(runnerID string) string { return "peer:" + runnerID }

// NewPlanner returns a planner; values below 1 mean 1.
func NewPlanner(fanout, registrySlots int) *Planner {
	return &Planner{fanout: max(fanout, 1), registrySlots: max(registrySlots, 1), serving: map[string]int{}}
}

// Ready records that a runner holds the image and may serve it.
func (p *Planner) Ready(runnerID string) {
	if _, ok := p.serving[runnerID]; ok {
		return
	}
	p.serving[runnerID] = 0
	p.ready = append(p.ready, runnerID)
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
