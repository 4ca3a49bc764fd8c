package faulttest

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/sdk/client"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/poll"
	"gitfleet/internal/domain/placement"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/mirror"
	"gitfleet/workflows"
)

// livenessOffline is the workers' GITFLEET_WORKER_OFFLINE_AFTER here: three
// heartbeats, so a live worker is never taken for dead.
const livenessOffline = 30 * time.Second

// A worker cut off from Temporal's frontend while its database stays
// reachable (its Temporal address is a proxy the test blackholes: the
// connections stay open, nothing passes) stops heartbeating: it goes
// offline, and the repositories it owned are collected by the others,
// their mirrors cloned there. The process runs on, and once the frontend
// answers again it heartbeats again and is live.
func TestWorkerCutOffFromTemporalHandsItsRepositoriesOn(t *testing.T) {
	ctx := context.Background()
	forgetWorkerRows(t)
	stamp := time.Now().UnixNano() % 1_000_000_000
	prefix := fmt.Sprintf("cut%d-", stamp)
	ids := []string{prefix + "a", prefix + "b", prefix + "c"}
	proxy := startBlackhole(t, env.Temporal.Address())
	procs := map[string]*workerProc{}
	dirs := map[string]string{}
	for i, id := range ids {
		name := nextName("live-" + id + "-")
		dirs[id] = filepath.Join(env.Dir, name, "mirrors")
		extra := []string{config.EnvWorkerID + "=" + id, config.EnvWorkerOffline + "=" + livenessOffline.String()}
		if i == 0 {
			extra = append(extra, config.EnvTemporalAddress+"="+proxy.addr())
		}
		procs[id] = launchProc(t, name, nil, extra)
	}
	for _, p := range procs {
		p.waitStarted(t)
	}
	waitLive(t, "all three workers live", prefix, ids)
	t.Cleanup(func() {
		for _, id := range ids {
			_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, id)
		}
	})

	// Repositories the cut worker owns while all three are live.
	owner := fmt.Sprintf("cut%d", stamp)
	var repos []repoid.ID
	for i := 0; len(repos) < 3; i++ {
		name := fmt.Sprintf("r%d", i)
		if placement.Owner(strings.ToLower(fg.CloneURL(owner, name)), ids) != ids[0] {
			continue
		}
		if _, err := fg.CreateRepo(owner, name); err != nil {
			t.Fatal(err)
		}
		if _, err := fg.Commit(owner, name, "main", map[string]string{"README.md": name + "\n"}, "first"); err != nil {
			t.Fatal(err)
		}
		repos = append(repos, repoid.ID{Host: fg.Host(), Owner: owner, Name: name})
	}

	proxy.cut()
	from := len(procs[ids[0]].logs())
	waitLive(t, "the cut worker offline, the others live", prefix, ids[1:])
	procs[ids[0]].waitLog(t, from, "heartbeat withheld", time.Minute)
	if procs[ids[0]].done() {
		t.Fatalf("the cut worker exited:\n%s", tail(procs[ids[0]].logs(), 3000))
	}

	// Their work goes to the others now, each clone made there.
	runs := make([]client.WorkflowRun, len(repos))
	for i, r := range repos {
		run, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(r), workflows.Collect,
			workflows.CollectInput{Repo: r, Trigger: "manual", PlaceWait: fleetPlaceWait})
		if err != nil {
			t.Fatal(err)
		}
		runs[i] = run
	}
	for i, run := range runs {
		var res workflows.CollectResult
		if err := run.Get(ctxTimeout(t, 3*time.Minute), &res); err != nil {
			t.Fatalf("collect %s with its owner cut off: %v", repos[i], err)
		}
		holders := mirrorHolders(t, dirs, repos[i])
		if len(holders) != 1 || holders[0] == ids[0] {
			t.Errorf("%s: mirrors on %v, want one, on a worker that polls (%v)", repos[i], holders, ids[1:])
		}
	}

	proxy.heal()
	waitLive(t, "the worker back once Temporal answers it", prefix, ids)
}

// A worker told to stop leaves the fleet before it drains: its row is not
// live while the activity it runs is still running, though its last
// heartbeat is fresh, and `starter worker list` would say "left".
func TestStoppedWorkerLeavesBeforeItDrains(t *testing.T) {
	ctx := context.Background()
	owner := fmt.Sprintf("leave%d", time.Now().UnixNano()%1_000_000_000)
	if _, err := fg.CreateRepo(owner, "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit(owner, "app", "main", map[string]string{"README.md": "leave\n"}, "first"); err != nil {
		t.Fatal(err)
	}
	entered, release := holdFetch(t, owner, "app")
	id := "leave-" + owner
	w := startWorker(t, config.EnvWorkerID+"="+id, config.EnvWorkerOffline+"="+livenessOffline.String())
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, id) })
	waitLive(t, "the worker live", id, []string{id})
	repo := repoid.ID{Host: fg.Host(), Owner: owner, Name: "app"}
	if _, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(repo), workflows.Collect, workflows.CollectInput{Repo: repo}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-entered:
	case <-time.After(time.Minute):
		t.Fatalf("the collection never fetched:\n%s", tail(w.logs(), 3000))
	}
	from := len(w.logs())
	w.signal(syscall.SIGTERM)
	w.waitLog(t, from, "worker draining", 30*time.Second)
	// The fetch is still held: the drain has not ended.
	if w.done() {
		t.Fatal("the worker exited before its activity finished")
	}
	live, err := env.Store.LiveWorkers(ctx, workflows.TaskQueue, livenessOffline)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(live, id) {
		t.Errorf("a draining worker is still live: %v", live)
	}
	all, err := env.Store.Workers(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, row := range all {
		if row.ID == id && (row.Left.IsZero() || row.Silent > livenessOffline) {
			t.Errorf("row %+v: want left, with a fresh heartbeat", row)
		}
	}
	close(release)
	select {
	case <-w.proc.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not exit after its activity finished:\n%s", tail(w.logs(), 3000))
	}
}

// A worker given no GITFLEET_WORKER_ID is named by its mirror directory:
// a second worker on the directory while the first runs is another (they
// shared the host name before), and restarted on the same directory (a
// recreated container on the same volume, whatever its host name) the
// first is the same worker again.
func TestWorkerIDStaysWithItsMirrorDirectory(t *testing.T) {
	dir := filepath.Join(env.Dir, nextName("volume"), "mirrors")
	unnamed := []string{config.EnvWorkerID + "=", config.EnvMirrorDir + "=" + dir, config.EnvWorkerOffline + "=" + livenessOffline.String()}
	first := startWorker(t, unnamed...)
	id := loggedWorkerID(t, first)
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, id) })
	waitLive(t, "the first worker live", id, []string{id})

	second := startWorker(t, unnamed...)
	other := loggedWorkerID(t, second)
	t.Cleanup(func() { _, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id = $1`, other) })
	if other == id {
		t.Fatalf("two workers on one mirror directory share id %q", id)
	}

	// The first restarts while the second runs: it finds its own id, the
	// one on the directory no process holds.
	first.signal(syscall.SIGTERM)
	select {
	case <-first.proc.Done():
	case <-time.After(time.Minute):
		t.Fatalf("the worker did not stop:\n%s", tail(first.logs(), 3000))
	}
	again := startWorker(t, unnamed...)
	if got := loggedWorkerID(t, again); got != id {
		t.Fatalf("restarted on its mirror directory: id %q, want %q", got, id)
	}
	second.kill()
	waitLive(t, "the restarted worker live again", id, []string{id})
	if _, err := os.Stat(filepath.Join(dir, mirror.WorkerIDsDir, id)); err != nil {
		t.Fatalf("the id is not kept beside the mirrors: %v", err)
	}
}

// waitLive waits until the live workers whose ids start with prefix are
// want.
func waitLive(t *testing.T, what, prefix string, want []string) {
	t.Helper()
	poll.Until(t, what, 3*time.Minute, func() (bool, string) {
		live, err := env.Store.LiveWorkers(context.Background(), workflows.TaskQueue, livenessOffline)
		if err != nil {
			t.Fatal(err)
		}
		var mine []string
		for _, id := range live {
			if strings.HasPrefix(id, prefix) {
				mine = append(mine, id)
			}
		}
		return slices.Equal(mine, want), fmt.Sprintf("live workers %v, want %v", live, want)
	})
}

var workerIDLog = regexp.MustCompile(`"workerId":"([^"]+)"`)

// loggedWorkerID is the id a worker process said it runs as.
func loggedWorkerID(t *testing.T, w *workerProc) string {
	t.Helper()
	w.waitLog(t, 0, `"workerId"`, time.Minute)
	m := workerIDLog.FindSubmatch(w.logs())
	if m == nil {
		t.Fatalf("%s logged no worker id", w.name)
	}
	return string(m[1])
}

// mirrorHolders are the workers whose mirror directory holds r.
func mirrorHolders(t *testing.T, dirs map[string]string, r repoid.ID) []string {
	t.Helper()
	var out []string
	for id, dir := range dirs {
		m, err := mirror.New(dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(m.Path(fg.CloneURL(r.Owner, r.Name))); err == nil {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// forgetWorkerRows deletes every workers row: workers of earlier tests,
// killed, would stay live for the offline bound.
func forgetWorkerRows(t *testing.T) {
	t.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(), `DELETE FROM workers`); err != nil {
		t.Fatal(err)
	}
}

// blackhole is a TCP proxy to a target that the test can cut: its
// connections stay open and what is sent either way is dropped, as a
// network that loses every packet; new connections are accepted and
// answered nothing. heal lets traffic through again and closes the
// connections made meanwhile, so that clients reconnect.
type blackhole struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	black bool
	conns []net.Conn
}

func startBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &blackhole{ln: ln, target: target}
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	go p.serve()
	return p
}

func (p *blackhole) addr() string { return p.ln.Addr().String() }

func (p *blackhole) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = true
}

func (p *blackhole) heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.black = false
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

func (p *blackhole) isBlack() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.black
}

func (p *blackhole) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		p.conns = append(p.conns, c)
		black := p.black
		p.mu.Unlock()
		if black {
			go func() { _, _ = io.Copy(io.Discard, c) }()
			continue
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, up)
		p.mu.Unlock()
		go p.pipe(up, c)
		go p.pipe(c, up)
	}
}

// pipe copies src to dst, dropping what passes while cut.
func (p *blackhole) pipe(dst, src net.Conn) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 && !p.isBlack() {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// holdFetch makes the forge hold the next fetch of owner/name until
// release is closed; entered says it is held.
func holdFetch(t *testing.T, owner, name string) (entered chan struct{}, release chan struct{}) {
	t.Helper()
	entered, release = make(chan struct{}, 1), make(chan struct{})
	remove := fg.AddFault(forge.Fault{Kind: forge.Git, Method: http.MethodPost, Times: 1,
		PathRE: regexp.MustCompile("^/" + owner + "/" + name + "(\\.git)?/git-upload-pack$"),
		Before: func(*http.Request) {
			entered <- struct{}{}
			<-release
		}})
	t.Cleanup(remove)
	t.Cleanup(func() {
		select {
		case <-release:
		default:
			close(release)
		}
	})
	return entered, release
}
