package store_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/store"
)

// Tests share the database, and the runner sweeps (MarkRunnersOffline,
// ForgetRunners) and listings see every test's runners: each test names
// its runners and snapshots under its own prefix and looks only at those.
// Liveness is judged on the database's clock, so a test ages a runner by
// moving its last heartbeat back from the database's now() (beat); the
// sweeps take runners of tests that ran before, which no test uses again.
var fleetSeq atomic.Int64

type fleet struct {
	t      *testing.T
	prefix string
}

func newFleet(t *testing.T) *fleet {
	f := &fleet{t: t, prefix: fmt.Sprintf("f%d", fleetSeq.Add(1))}
	// The workers it registers leave no rows behind (a live row is
	// placement's to trust).
	t.Cleanup(func() {
		_, _ = env.Store.Pool().Exec(context.Background(), `DELETE FROM workers WHERE id LIKE $1`, f.prefix+"-%")
	})
	return f
}

func (f *fleet) id(name string) string { return f.prefix + "-" + name }

// own keeps this fleet's ids, without the prefix.
func (f *fleet) own(ids []string) []string {
	var out []string
	for _, id := range ids {
		if rest, ok := strings.CutPrefix(id, f.prefix+"-"); ok {
			out = append(out, rest)
		}
	}
	return out
}

func (f *fleet) ownRunners(rs []snapshot.Runner) []string {
	var ids []string
	for _, r := range rs {
		ids = append(ids, r.ID)
	}
	return f.own(ids)
}

// register adds a runner registered, and last heard of, at at.
func (f *fleet) register(name string, at time.Time) string {
	f.t.Helper()
	id := f.id(name)
	if err := env.Store.RegisterRunner(context.Background(), snapshot.Runner{ID: id, PeerAddr: id + ":7000", Capacity: 2}); err != nil {
		f.t.Fatalf("register %s: %v", id, err)
	}
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE runners SET registered_at = $2, last_heartbeat = $2 WHERE id = $1`,
		id, at); err != nil {
		f.t.Fatal(err)
	}
	return id
}

// beat sets a runner's last heartbeat ago before the database's now().
func (f *fleet) beat(id string, ago time.Duration) {
	f.t.Helper()
	if _, err := env.Store.Pool().Exec(context.Background(), `UPDATE runners SET last_heartbeat = now() - $2 * interval '1 second'
		WHERE id = $1`, id, ago.Seconds()); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fleet) setState(id string, state snapshot.RunnerState, at time.Time) {
	f.t.Helper()
	if err := env.Store.SetRunnerState(context.Background(), id, state, at); err != nil {
		f.t.Fatalf("set %s %s: %v", id, state, err)
	}
}

func (f *fleet) runner(id string) snapshot.Runner {
	f.t.Helper()
	r, err := env.Store.Runner(context.Background(), id)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func (f *fleet) snapshot(name string, at time.Time) string {
	f.t.Helper()
	name = f.id(name)
	_, _, err := env.Store.CreateSnapshot(context.Background(), snapshot.Snapshot{Name: name, Kind: snapshot.KindImage, ImageRef: "reg.example.com/" + name + ":1"}, at)
	if err != nil {
		f.t.Fatalf("create snapshot %s: %v", name, err)
	}
	return name
}

func (f *fleet) row(runnerID, ref string, state snapshot.RowState, at time.Time) {
	f.t.Helper()
	if _, _, err := env.Store.InsertSnapshotRunner(context.Background(), runnerID, ref, state, at); err != nil {
		f.t.Fatalf("insert row %s/%s: %v", runnerID, ref, err)
	}
}

func (f *fleet) getRow(runnerID, ref string) snapshot.Row {
	f.t.Helper()
	r, err := env.Store.SnapshotRunner(context.Background(), runnerID, ref)
	if err != nil {
		f.t.Fatal(err)
	}
	return r
}

func isNotFound(t *testing.T, err error, msg string) {
	t.Helper()
	if !errors.Is(err, store.ErrNotFound) || err.Error() != msg {
		t.Errorf("error = %v, want ErrNotFound %q", err, msg)
	}
}

func TestRunnerLifecycle(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	id := f.register("r1", t0)
	if r := f.runner(id); r.State != snapshot.RunnerReady || !r.RegisteredAt.Equal(t0) || !r.LastHeartbeat.Equal(t0) || r.Capacity != 2 {
		t.Fatalf("new runner = %+v", r)
	}

	err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "new:7000", Capacity: 5, QuotaBytes: 1 << 30,
		State: snapshot.RunnerOffline, RegisteredAt: t0.Add(time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	r := f.runner(id)
	if r.PeerAddr != "new:7000" || r.Capacity != 5 || r.QuotaBytes != 1<<30 || !r.LastHeartbeat.After(t0) ||
		!r.RegisteredAt.Equal(t0) || r.State != snapshot.RunnerReady {
		t.Fatalf("re-registered runner = %+v, want new address, capacity and quota, heard of now, registered at %v, ready", r, t0)
	}

	at := t0
	for _, step := range []struct {
		what string
		do   func() error
		want snapshot.RunnerState
	}{
		{"drain", func() error { return env.Store.SetRunnerState(ctx, id, snapshot.RunnerDraining, at) }, snapshot.RunnerDraining},
		{"re-register while draining", func() error {
			return env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "new:7000", Capacity: 5})
		}, snapshot.RunnerDraining},
		{"heartbeat while draining", func() error { return env.Store.HeartbeatRunner(ctx, id) }, snapshot.RunnerDraining},
		{"resume", func() error { return env.Store.SetRunnerState(ctx, id, snapshot.RunnerReady, at) }, snapshot.RunnerReady},
		{"offline", func() error { return env.Store.SetRunnerState(ctx, id, snapshot.RunnerOffline, at) }, snapshot.RunnerOffline},
		{"heartbeat while offline", func() error { return env.Store.HeartbeatRunner(ctx, id) }, snapshot.RunnerReady},
		{"offline again", func() error { return env.Store.SetRunnerState(ctx, id, snapshot.RunnerOffline, at) }, snapshot.RunnerOffline},
		{"re-register while offline", func() error {
			return env.Store.RegisterRunner(ctx, snapshot.Runner{ID: id, PeerAddr: "new:7000", Capacity: 5})
		}, snapshot.RunnerReady},
	} {
		at = at.Add(time.Second)
		f.beat(id, time.Hour)
		before := f.runner(id).LastHeartbeat
		if err := step.do(); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		r := f.runner(id)
		if r.State != step.want {
			t.Fatalf("after %s: state %s, want %s", step.what, r.State, step.want)
		}
		if !r.RegisteredAt.Equal(t0) {
			t.Fatalf("after %s: registered at %v, want %v", step.what, r.RegisteredAt, t0)
		}
		if heard := strings.Contains(step.what, "register") || strings.Contains(step.what, "heartbeat"); heard != r.LastHeartbeat.After(before) {
			t.Fatalf("after %s: last heartbeat %v (was %v)", step.what, r.LastHeartbeat, before)
		}
	}

	ghost := f.id("ghost")
	isNotFound(t, env.Store.HeartbeatRunner(ctx, ghost), fmt.Sprintf("runner %q is not registered", ghost))
	isNotFound(t, env.Store.SetRunnerState(ctx, ghost, snapshot.RunnerDraining, t0), fmt.Sprintf("runner %q is not registered", ghost))
	_, err = env.Store.Runner(ctx, ghost)
	isNotFound(t, err, fmt.Sprintf("runner %q is not registered", ghost))
	if err := env.Store.SetRunnerState(ctx, id, "asleep", t0); !errors.Is(err, snapshot.ErrInvalid) {
		t.Errorf("unknown runner state: %v, want ErrInvalid", err)
	}
	for _, bad := range []string{"", "Upper", "a_b", "../x", strings.Repeat("a", 64)} {
		if err := env.Store.RegisterRunner(ctx, snapshot.Runner{ID: bad}); !errors.Is(err, snapshot.ErrInvalid) {
			t.Errorf("RegisterRunner(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestEligibleRunnersAreReadyAndFresh(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	for name, ago := range map[string]time.Duration{"fresh": 0, "recent": 5 * time.Minute, "stale": 2 * time.Hour} {
		f.beat(f.register(name, t0), ago)
	}
	f.setState(f.register("draining", t0), snapshot.RunnerDraining, t0)
	f.setState(f.register("offline", t0), snapshot.RunnerOffline, t0)

	for _, tc := range []struct {
		fresh time.Duration
		want  []string
	}{
		{time.Minute, []string{"fresh"}},
		{time.Hour, []string{"fresh", "recent"}},
		{3 * time.Hour, []string{"fresh", "recent", "stale"}},
	} {
		got, err := env.Store.EligibleRunners(ctx, tc.fresh)
		if err != nil {
			t.Fatal(err)
		}
		if own := f.ownRunners(got); !slices.Equal(own, tc.want) {
			t.Errorf("eligible within %v = %v, want %v", tc.fresh, own, tc.want)
		}
	}
	all, err := env.Store.Runners(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if own := f.ownRunners(all); !slices.Equal(own, []string{"draining", "fresh", "offline", "recent", "stale"}) {
		t.Errorf("runners = %v", own)
	}
	if !slices.IsSortedFunc(all, func(a, b snapshot.Runner) int { return strings.Compare(a.ID, b.ID) }) {
		t.Error("runners not sorted by id")
	}
}

func TestMarkRunnersOfflineFailsOnlyRowsInFlight(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	e := time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC) // the rows' times
	stale := f.register("stale", e)
	fresh := f.register("fresh", e)
	gone := f.register("gone", e)
	f.setState(gone, snapshot.RunnerOffline, e)
	drained := f.register("drained", e)
	f.setState(drained, snapshot.RunnerDraining, e)
	for _, id := range []string{stale, gone, drained} {
		f.beat(id, 10*time.Minute)
	}
	f.beat(fresh, 0)

	refs := map[snapshot.RowState]string{}
	for _, st := range []snapshot.RowState{snapshot.RowPulling, snapshot.RowBuilding, snapshot.RowReady, snapshot.RowError, snapshot.RowRemoving} {
		refs[st] = f.snapshot(strings.ReplaceAll(string(st), "_", "-"), e)
		f.row(stale, refs[st], st, e)
	}
	if _, err := env.Store.TransitionSnapshotRunner(ctx, stale, refs[snapshot.RowError], nil, snapshot.RowError, "image exceeds store quota", e); err != nil {
		t.Fatal(err)
	}
	f.row(fresh, refs[snapshot.RowPulling], snapshot.RowPulling, e)
	f.row(drained, refs[snapshot.RowBuilding], snapshot.RowBuilding, e)

	now := e.Add(6 * time.Minute)
	ids, err := env.Store.MarkRunnersOffline(ctx, 5*time.Minute, now)
	if err != nil {
		t.Fatal(err)
	}
	if own := f.own(ids); !slices.Equal(own, []string{"drained", "stale"}) {
		t.Fatalf("marked offline %v, want [drained stale]", own)
	}
	for _, id := range []string{stale, drained, gone} {
		if st := f.runner(id).State; st != snapshot.RunnerOffline {
			t.Errorf("runner %s is %s, want offline", id, st)
		}
	}
	if st := f.runner(fresh).State; st != snapshot.RunnerReady {
		t.Errorf("fresh runner is %s", st)
	}

	for _, tc := range []struct {
		runner, ref string
		state       snapshot.RowState
		reason      string
		updated     time.Time
	}{
		{stale, refs[snapshot.RowPulling], snapshot.RowError, snapshot.ReasonOffline, now},
		{stale, refs[snapshot.RowBuilding], snapshot.RowError, snapshot.ReasonOffline, now},
		{stale, refs[snapshot.RowReady], snapshot.RowReady, "", e},
		{stale, refs[snapshot.RowError], snapshot.RowError, "image exceeds store quota", e},
		{stale, refs[snapshot.RowRemoving], snapshot.RowRemoving, "", e},
		{drained, refs[snapshot.RowBuilding], snapshot.RowError, snapshot.ReasonOffline, now},
		{fresh, refs[snapshot.RowPulling], snapshot.RowPulling, "", e},
	} {
		r := f.getRow(tc.runner, tc.ref)
		if r.State != tc.state || r.ErrorReason != tc.reason || !r.UpdatedAt.Equal(tc.updated) {
			t.Errorf("row %s/%s = %s %q at %v, want %s %q at %v", tc.runner, tc.ref, r.State, r.ErrorReason, r.UpdatedAt, tc.state, tc.reason, tc.updated)
		}
	}

	inError, err := env.Store.RowsInError(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var own []string
	for _, r := range inError {
		if strings.HasPrefix(r.RunnerID, f.prefix+"-") {
			own = append(own, r.RunnerID+"/"+r.SnapshotRef)
		}
	}
	want := []string{drained + "/" + refs[snapshot.RowBuilding], stale + "/" + refs[snapshot.RowBuilding],
		stale + "/" + refs[snapshot.RowError], stale + "/" + refs[snapshot.RowPulling]}
	if !slices.Equal(own, want) {
		t.Errorf("rows in error = %v\nwant %v", own, want)
	}

	again, err := env.Store.MarkRunnersOffline(ctx, 5*time.Minute, now.Add(time.Minute))
	if err != nil || len(f.own(again)) != 0 {
		t.Errorf("second sweep marked %v, %v; want none", f.own(again), err)
	}
}

func TestForgetRunnersCascadesRows(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	e := time.Date(2002, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := f.snapshot("img", e)
	long := f.register("long-gone", e)
	f.setState(long, snapshot.RunnerOffline, e)
	recent := f.register("recently-gone", e)
	f.setState(recent, snapshot.RunnerOffline, e)
	silent := f.register("silent", e) // stale but not yet marked offline
	for id, ago := range map[string]time.Duration{long: 3 * time.Hour, recent: 30 * time.Minute, silent: 3 * time.Hour} {
		f.beat(id, ago)
		f.row(id, ref, snapshot.RowReady, e)
	}

	ids, err := env.Store.ForgetRunners(ctx, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if own := f.own(ids); !slices.Equal(own, []string{"long-gone"}) {
		t.Fatalf("forgot %v, want [long-gone]", own)
	}
	_, err = env.Store.Runner(ctx, long)
	isNotFound(t, err, fmt.Sprintf("runner %q is not registered", long))
	rows, err := env.Store.SnapshotRunners(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	var holders []string
	for _, r := range rows {
		holders = append(holders, r.RunnerID)
	}
	if !slices.Equal(holders, []string{recent, silent}) {
		t.Errorf("rows left on %v, want [%s %s]", holders, recent, silent)
	}
}

func TestCreateSnapshotJoinsSameSourceOnly(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	cb := newFixture(t).apply("o", "r", "900", 0, "")
	img := snapshot.Snapshot{Name: f.id("img"), Kind: snapshot.KindImage, ImageRef: "reg.example.com/a:1"}
	repo := snapshot.Snapshot{Name: f.id("repo"), Kind: snapshot.KindRepo, Repo: "h/o/r", CodebaseID: cb.CodebaseID,
		ExternalID: "900", Commit: "abc123", BaseImage: "reg.example.com/base:1"}

	for _, s := range []snapshot.Snapshot{img, repo} {
		got, existed, err := env.Store.CreateSnapshot(ctx, s, t0)
		if err != nil || existed {
			t.Fatalf("create %s: existed=%v, %v", s.Name, existed, err)
		}
		want := s
		want.State, want.CreatedAt, want.UpdatedAt = snapshot.Pending, got.CreatedAt, got.UpdatedAt
		if got != want || !got.CreatedAt.Equal(t0) || !got.UpdatedAt.Equal(t0) {
			t.Fatalf("created %+v\nwant     %+v at %v", got, want, t0)
		}
	}

	with := func(s snapshot.Snapshot, change func(*snapshot.Snapshot)) snapshot.Snapshot {
		change(&s)
		return s
	}
	later := t0.Add(time.Hour)
	for _, tc := range []struct {
		what string
		in   snapshot.Snapshot
		join bool
	}{
		{"same image", img, true},
		{"same image, other digest field", with(img, func(s *snapshot.Snapshot) { s.Digest = "sha256:ff" }), true},
		{"other tag", with(img, func(s *snapshot.Snapshot) { s.ImageRef = "reg.example.com/a:2" }), false},
		{"image on a base", with(img, func(s *snapshot.Snapshot) { s.BaseImage = "reg.example.com/base:1" }), false},
		{"repo under an image's name", with(repo, func(s *snapshot.Snapshot) { s.Name = img.Name }), false},
		{"same repo commit", repo, true},
		{"same commit, repository renamed since", with(repo, func(s *snapshot.Snapshot) { s.Repo = "h/o/renamed" }), true},
		{"other commit", with(repo, func(s *snapshot.Snapshot) { s.Commit = "def456" }), false},
		{"other base", with(repo, func(s *snapshot.Snapshot) { s.BaseImage = "" }), false},
	} {
		got, existed, err := env.Store.CreateSnapshot(ctx, tc.in, later)
		switch {
		case tc.join && (err != nil || !existed || !got.CreatedAt.Equal(t0) || got.Name != tc.in.Name):
			t.Errorf("%s: %+v existed=%v, %v; want to join the one created at %v", tc.what, got, existed, err, t0)
		case !tc.join && !errors.Is(err, store.ErrSnapshotExists):
			t.Errorf("%s: %+v existed=%v, %v; want ErrSnapshotExists", tc.what, got, existed, err)
		case !tc.join && !strings.Contains(err.Error(), fmt.Sprintf("snapshot %q already exists", tc.in.Name)):
			t.Errorf("%s: message %q does not name the snapshot", tc.what, err)
		}
	}

	if _, _, err := env.Store.CreateSnapshot(ctx, with(repo, func(s *snapshot.Snapshot) {
		s.Name, s.CodebaseID = f.id("nocb"), 1<<60
	}), t0); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("snapshot of a missing codebase: %v, want ErrNotFound", err)
	}
	for _, bad := range []snapshot.Snapshot{
		{Name: "Bad/Name", Kind: snapshot.KindImage, ImageRef: "x"},
		{Name: f.id("nokind"), Kind: "tarball"},
	} {
		if _, _, err := env.Store.CreateSnapshot(ctx, bad, t0); !errors.Is(err, snapshot.ErrInvalid) {
			t.Errorf("create %+v: %v, want ErrInvalid", bad, err)
		}
	}
	_, err := env.Store.Snapshot(ctx, f.id("never"))
	isNotFound(t, err, fmt.Sprintf("snapshot %q does not exist", f.id("never")))

	all, err := env.Store.Snapshots(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range all {
		names = append(names, s.Name)
	}
	if own := f.own(names); !slices.Equal(own, []string{"img", "repo"}) {
		t.Errorf("snapshots = %v", own)
	}
}

func TestConcurrentIdenticalCreatesInsertOnce(t *testing.T) {
	f := newFleet(t)
	in := snapshot.Snapshot{Name: f.id("busy"), Kind: snapshot.KindImage, ImageRef: "reg.example.com/busy:1"}
	const n = 20
	existed := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, existed[i], errs[i] = env.Store.CreateSnapshot(context.Background(), in, t0.Add(time.Duration(i)*time.Second))
		}()
	}
	wg.Wait()
	inserted := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("create %d: %v", i, errs[i])
		}
		if !existed[i] {
			inserted++
		}
	}
	if inserted != 1 {
		t.Fatalf("%d creates inserted, want exactly 1", inserted)
	}
}

func TestConcurrentInsertSnapshotRunnerKeepsOneRow(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	id := f.register("r", t0)
	ref := f.snapshot("img", t0)
	const n = 20
	inserted := make([]bool, n)
	rows := make([]snapshot.Row, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rows[i], inserted[i], errs[i] = env.Store.InsertSnapshotRunner(ctx, id, ref, snapshot.RowPulling, t0.Add(time.Duration(i)*time.Second))
		}()
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("insert %d: %v", i, errs[i])
		}
		if inserted[i] {
			count++
		}
		if rows[i].RunnerID != id || rows[i].SnapshotRef != ref || rows[i].State != snapshot.RowPulling {
			t.Errorf("insert %d returned %+v", i, rows[i])
		}
	}
	if count != 1 {
		t.Fatalf("%d inserts inserted, want exactly 1", count)
	}
	all, err := env.Store.SnapshotRunners(ctx, ref)
	if err != nil || len(all) != 1 {
		t.Fatalf("rows = %+v, %v; want one", all, err)
	}

	ghost := f.id("ghost")
	_, _, err = env.Store.InsertSnapshotRunner(ctx, ghost, ref, snapshot.RowPulling, t0)
	isNotFound(t, err, fmt.Sprintf("runner %q is not registered", ghost))
	_, _, err = env.Store.InsertSnapshotRunner(ctx, id, f.id("nothing"), snapshot.RowPulling, t0)
	isNotFound(t, err, fmt.Sprintf("snapshot %q does not exist", f.id("nothing")))
	_, err = env.Store.SnapshotRunner(ctx, ghost, ref)
	isNotFound(t, err, fmt.Sprintf("snapshot %q is not on runner %q", ref, ghost))
}

func TestTransitionSnapshotRunner(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	id := f.register("r", t0)
	ref := f.snapshot("img", t0)
	f.row(id, ref, snapshot.RowPulling, t0)
	at := func(m int) time.Time { return t0.Add(time.Duration(m) * time.Minute) }
	const net = "transient: connection reset"

	// progress: done, total, source; applied only while in flight.
	type progress struct {
		done, total int64
		source      string
	}
	for _, step := range []struct {
		what     string
		minute   int
		progress *progress
		from     []snapshot.RowState
		to       snapshot.RowState
		reason   string

		changed     bool
		state       snapshot.RowState
		wantReason  string
		retries     int
		updated     int // minute
		done, total int64
		source      string
	}{
		{what: "progress", minute: 1, progress: &progress{50, 100, snapshot.Registry},
			state: snapshot.RowPulling, updated: 0, done: 50, total: 100, source: snapshot.Registry},
		{what: "from a state it is not in", minute: 2, from: []snapshot.RowState{snapshot.RowBuilding}, to: snapshot.RowReady,
			state: snapshot.RowPulling, updated: 0, done: 50, total: 100, source: snapshot.Registry},
		{what: "pull fails", minute: 3, from: []snapshot.RowState{snapshot.RowPulling, snapshot.RowBuilding}, to: snapshot.RowError, reason: net,
			changed: true, state: snapshot.RowError, wantReason: net, updated: 3, done: 50, total: 100, source: snapshot.Registry},
		{what: "late progress", minute: 4, progress: &progress{99, 100, "peer:x"},
			state: snapshot.RowError, wantReason: net, updated: 3, done: 50, total: 100, source: snapshot.Registry},
		{what: "retry", minute: 5, from: []snapshot.RowState{snapshot.RowError}, to: snapshot.RowPulling, reason: "ignored",
			changed: true, state: snapshot.RowPulling, retries: 1, updated: 5, done: 50, total: 100, source: snapshot.Registry},
		{what: "progress from a peer", minute: 6, progress: &progress{10, 200, snapshot.PeerSource("p")},
			state: snapshot.RowPulling, retries: 1, updated: 5, done: 10, total: 200, source: "peer:p"},
		{what: "progress without a source", minute: 7, progress: &progress{20, 200, ""},
			state: snapshot.RowPulling, retries: 1, updated: 5, done: 20, total: 200, source: "peer:p"},
		{what: "times out", minute: 8, from: []snapshot.RowState{snapshot.RowPulling}, to: snapshot.RowError, reason: snapshot.ReasonTimeout,
			changed: true, state: snapshot.RowError, wantReason: snapshot.ReasonTimeout, retries: 1, updated: 8, done: 20, total: 200, source: "peer:p"},
		{what: "retried as a build", minute: 9, from: []snapshot.RowState{snapshot.RowError}, to: snapshot.RowBuilding,
			changed: true, state: snapshot.RowBuilding, retries: 2, updated: 9, done: 20, total: 200, source: "peer:p"},
		{what: "ready", minute: 10, from: []snapshot.RowState{snapshot.RowBuilding}, to: snapshot.RowReady,
			changed: true, state: snapshot.RowReady, updated: 10, done: 200, total: 200, source: "peer:p"},
		{what: "repeated ready report", minute: 11, from: []snapshot.RowState{snapshot.RowPulling, snapshot.RowBuilding}, to: snapshot.RowReady,
			state: snapshot.RowReady, updated: 10, done: 200, total: 200, source: "peer:p"},
		{what: "from any state", minute: 12, to: snapshot.RowRemoving,
			changed: true, state: snapshot.RowRemoving, updated: 12, done: 200, total: 200, source: "peer:p"},
	} {
		var changed bool
		var err error
		if step.progress != nil {
			err = env.Store.SetSnapshotRunnerProgress(ctx, id, ref, step.progress.done, step.progress.total, step.progress.source, at(step.minute))
		} else {
			changed, err = env.Store.TransitionSnapshotRunner(ctx, id, ref, step.from, step.to, step.reason, at(step.minute))
		}
		if err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if changed != step.changed {
			t.Errorf("%s: changed = %v, want %v", step.what, changed, step.changed)
		}
		r := f.getRow(id, ref)
		if r.State != step.state || r.ErrorReason != step.wantReason || r.Retries != step.retries || !r.UpdatedAt.Equal(at(step.updated)) ||
			r.BytesDone != step.done || r.BytesTotal != step.total || r.Source != step.source || !r.CreatedAt.Equal(t0) {
			t.Fatalf("%s: row = %+v\nwant %s %q retries %d updated %v bytes %d/%d source %q",
				step.what, r, step.state, step.wantReason, step.retries, at(step.updated), step.done, step.total, step.source)
		}
	}

	changed, err := env.Store.TransitionSnapshotRunner(ctx, id, f.id("nothing"), nil, snapshot.RowReady, "", t0)
	if err != nil || changed {
		t.Errorf("transition of a missing row: %v, %v; want false, nil", changed, err)
	}
	if err := env.Store.DeleteSnapshotRunner(ctx, id, ref); err != nil {
		t.Fatal(err)
	}
	if rows, err := env.Store.RunnerSnapshots(ctx, id); err != nil || len(rows) != 0 {
		t.Errorf("rows after delete: %+v, %v", rows, err)
	}
	if err := env.Store.DeleteSnapshotRunner(ctx, id, ref); err != nil {
		t.Errorf("deleting a missing row: %v", err)
	}
}

func TestSnapshotStateAndImage(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	name := f.snapshot("img", t0)
	get := func() snapshot.Snapshot {
		t.Helper()
		s, err := env.Store.Snapshot(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	if err := env.Store.SetSnapshotState(ctx, name, snapshot.Error, "manifest unknown", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.State != snapshot.Error || s.ErrorReason != "manifest unknown" || !s.UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("after error: %+v", s)
	}
	if err := env.Store.SetSnapshotState(ctx, name, snapshot.Pulling, "stale reason", t0.Add(2*time.Minute)); err != nil {
		t.Fatal(err)
	}
	if s := get(); s.State != snapshot.Pulling || s.ErrorReason != "" {
		t.Fatalf("after pulling: %+v", s)
	}
	isNotFound(t, env.Store.SetSnapshotState(ctx, f.id("never"), snapshot.Pulling, "", t0), fmt.Sprintf("snapshot %q does not exist", f.id("never")))

	for i, want := range []bool{true, false} {
		changed, err := env.Store.ActivateSnapshot(ctx, name, t0.Add(time.Duration(3+i)*time.Minute))
		if err != nil || changed != want {
			t.Fatalf("activate %d: %v, %v; want %v", i, changed, err, want)
		}
	}
	if s := get(); s.State != snapshot.Active || !s.UpdatedAt.Equal(t0.Add(3*time.Minute)) {
		t.Fatalf("after activate: %+v", s)
	}
	if err := env.Store.SetSnapshotState(ctx, name, snapshot.Error, "x", t0); err != nil {
		t.Fatal(err)
	}
	if changed, err := env.Store.ActivateSnapshot(ctx, name, t0); err != nil || !changed {
		t.Fatalf("activate from error: %v, %v", changed, err)
	}
	_, err := env.Store.ActivateSnapshot(ctx, f.id("never"), t0)
	isNotFound(t, err, fmt.Sprintf("snapshot %q does not exist", f.id("never")))

	const d1, d2 = "sha256:1111", "sha256:2222"
	for _, tc := range []struct {
		ref, digest string
		ok          bool
	}{
		{"", d1, true},
		{"", d1, true},                  // a retried activity
		{"other.example/x:1", d1, true}, // the user's reference stays
		{"", d2, false},
		{"", "", false},
	} {
		err := env.Store.SetSnapshotImage(ctx, name, tc.ref, tc.digest, t0.Add(time.Hour))
		if (err == nil) != tc.ok {
			t.Errorf("SetSnapshotImage(%q, %q) = %v, want ok=%v", tc.ref, tc.digest, err, tc.ok)
		}
	}
	if s := get(); s.Digest != d1 || s.ImageRef != "reg.example.com/"+name+":1" {
		t.Errorf("image = %s @ %s", s.ImageRef, s.Digest)
	}
	isNotFound(t, env.Store.SetSnapshotImage(ctx, f.id("never"), "", d1, t0), fmt.Sprintf("snapshot %q does not exist", f.id("never")))

	cb := newFixture(t).apply("o", "built", "901", 0, "")
	built := snapshot.Snapshot{Name: f.id("built"), Kind: snapshot.KindRepo, CodebaseID: cb.CodebaseID, Commit: "abc"}
	if _, _, err := env.Store.CreateSnapshot(ctx, built, t0); err != nil {
		t.Fatal(err)
	}
	if err := env.Store.SetSnapshotImage(ctx, built.Name, "reg.example.com/built:abc", d2, t0.Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if s, err := env.Store.Snapshot(ctx, built.Name); err != nil || s.ImageRef != "reg.example.com/built:abc" || s.Digest != d2 ||
		s.PullRef() != "reg.example.com/built@"+d2 || !s.UpdatedAt.Equal(t0.Add(time.Hour)) {
		t.Errorf("built snapshot = %+v, %v", s, err)
	}
}

func TestMarkSnapshotRemoving(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	ref := f.snapshot("img", t0)
	other := f.snapshot("other", t0)
	a, b, c := f.register("a", t0), f.register("b", t0), f.register("c", t0)
	f.row(a, ref, snapshot.RowReady, t0)
	f.row(b, ref, snapshot.RowPulling, t0)
	f.row(c, ref, snapshot.RowPulling, t0)
	if _, err := env.Store.TransitionSnapshotRunner(ctx, c, ref, nil, snapshot.RowError, snapshot.ReasonTimeout, t0); err != nil {
		t.Fatal(err)
	}
	f.row(a, other, snapshot.RowReady, t0)
	if _, err := env.Store.ActivateSnapshot(ctx, ref, t0); err != nil {
		t.Fatal(err)
	}

	now := t0.Add(time.Hour)
	rows, err := env.Store.MarkSnapshotRemoving(ctx, ref, now)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range rows {
		got = append(got, r.RunnerID)
		if r.State != snapshot.RowRemoving || r.ErrorReason != "" || !r.UpdatedAt.Equal(now) {
			t.Errorf("row %+v, want removing at %v", r, now)
		}
	}
	if !slices.Equal(got, []string{a, b, c}) {
		t.Errorf("rows of %v, want a, b, c", got)
	}
	s, err := env.Store.Snapshot(ctx, ref)
	if err != nil || s.State != snapshot.Removing || !s.UpdatedAt.Equal(now) {
		t.Fatalf("snapshot = %+v, %v", s, err)
	}
	if r := f.getRow(a, other); r.State != snapshot.RowReady {
		t.Errorf("another snapshot's row became %s", r.State)
	}
	if changed, err := env.Store.ActivateSnapshot(ctx, ref, now); err != nil || changed {
		t.Errorf("activate while removing: %v, %v; want false", changed, err)
	}
	if again, err := env.Store.MarkSnapshotRemoving(ctx, ref, now.Add(time.Hour)); err != nil || len(again) != 3 || !again[0].UpdatedAt.Equal(now) {
		t.Errorf("second removal: %+v, %v; want the same rows untouched", again, err)
	}
	_, err = env.Store.MarkSnapshotRemoving(ctx, f.id("never"), now)
	isNotFound(t, err, fmt.Sprintf("snapshot %q does not exist", f.id("never")))
}

func TestReadyRunnersLeaveOutOfflineAndUnready(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	ref := f.snapshot("img", t0)
	other := f.snapshot("other", t0)
	for _, tc := range []struct {
		runner string
		state  snapshot.RunnerState
		ref    string
		row    snapshot.RowState
	}{
		{"ready", snapshot.RunnerReady, ref, snapshot.RowReady},
		{"draining", snapshot.RunnerDraining, ref, snapshot.RowReady},
		{"offline", snapshot.RunnerOffline, ref, snapshot.RowReady},
		{"pulling", snapshot.RunnerReady, ref, snapshot.RowPulling},
		{"removing", snapshot.RunnerReady, ref, snapshot.RowRemoving},
		{"elsewhere", snapshot.RunnerReady, other, snapshot.RowReady},
	} {
		id := f.register(tc.runner, t0)
		f.row(id, tc.ref, tc.row, t0)
		if tc.state != snapshot.RunnerReady {
			f.setState(id, tc.state, t0)
		}
	}
	got, err := env.Store.ReadyRunners(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if ids := f.own(func() []string {
		var ids []string
		for _, r := range got {
			ids = append(ids, r.ID)
		}
		return ids
	}()); !slices.Equal(ids, []string{"draining", "ready"}) || len(got) != 2 {
		t.Errorf("ready runners = %v, want [draining ready]", ids)
	}
}

func TestDeleteSnapshotCascadesRows(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	ref := f.snapshot("img", t0)
	keep := f.snapshot("keep", t0)
	a, b := f.register("a", t0), f.register("b", t0)
	for _, id := range []string{a, b} {
		f.row(id, ref, snapshot.RowReady, t0)
	}
	f.row(a, keep, snapshot.RowReady, t0)
	for range 2 { // the second finds nothing, which is fine
		if err := env.Store.DeleteSnapshot(ctx, ref); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := env.Store.Snapshot(ctx, ref); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("deleted snapshot: %v", err)
	}
	if rows, err := env.Store.SnapshotRunners(ctx, ref); err != nil || len(rows) != 0 {
		t.Errorf("rows of a deleted snapshot: %+v, %v", rows, err)
	}
	rows, err := env.Store.RunnerSnapshots(ctx, a)
	if err != nil || len(rows) != 1 || rows[0].SnapshotRef != keep {
		t.Errorf("runner a's rows: %+v, %v; want only %s", rows, err, keep)
	}
}

// The CHECK constraints hold writers that skip the domain's validation to
// the same rules: each name is accepted by SQL exactly when the domain
// accepts it. Every insert is rolled back, so the names need not be unique.
func TestChecksMatchDomainValidation(t *testing.T) {
	ctx := context.Background()
	try := func(stmt string, args ...any) error {
		tx, err := env.Store.Pool().Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		_, err = tx.Exec(ctx, stmt, args...)
		return err
	}
	const (
		insertRunner = `INSERT INTO runners (id, peer_addr, capacity, state, last_heartbeat, registered_at)
			VALUES ($1, '', 1, $2, now(), now())`
		insertSnapshot = `INSERT INTO snapshots (name, kind, state, created_at, updated_at)
			VALUES ($1, $2, $3, now(), now())`
	)
	for _, name := range []string{
		"ok", "r1", "ubuntu-24.04", "a_b", "Upper", "-lead", ".hidden", "_x", "a/b", "../etc", "a b",
		"a\nb", "ok\n", "\nok", "é", "",
		strings.Repeat("a", 63), strings.Repeat("b", 64), strings.Repeat("c", 128), strings.Repeat("d", 129),
	} {
		checkAgrees(t, "runner id", name, snapshot.ValidRunnerID(name) == nil, try(insertRunner, name, "ready"))
		checkAgrees(t, "snapshot name", name, snapshot.ValidName(name) == nil, try(insertSnapshot, name, "image", "pending"))
	}
	for _, tc := range []struct {
		stmt string
		args []any
	}{
		{insertRunner, []any{"ok", "gone"}},
		{insertSnapshot, []any{"ok", "tarball", "pending"}},
		{insertSnapshot, []any{"ok", "image", "done"}},
	} {
		checkAgrees(t, "row", fmt.Sprint(tc.args), false, try(tc.stmt, tc.args...))
	}
}

func checkAgrees(t *testing.T, what, name string, valid bool, err error) {
	t.Helper()
	var pg *pgconn.PgError
	switch {
	case valid && err != nil:
		t.Errorf("%s %q is valid but SQL rejected it: %v", what, name, err)
	case !valid && (!errors.As(err, &pg) || pg.Code != "23514"):
		t.Errorf("%s %q is invalid but SQL said %v, want a check violation", what, name, err)
	}
}

func TestForgetRunnersFinishesRemovalsLeftOnThem(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	e := time.Date(2003, 1, 1, 0, 0, 0, 0, time.UTC)
	gone := f.register("gone", e)
	f.setState(gone, snapshot.RunnerOffline, e)
	f.beat(gone, 3*time.Hour)
	live := f.register("live", e)
	f.beat(live, 0)
	onlyGone, both, kept := f.snapshot("only-on-gone", e), f.snapshot("on-both", e), f.snapshot("not-removing", e)
	f.row(gone, onlyGone, snapshot.RowRemoving, e)
	f.row(gone, both, snapshot.RowRemoving, e)
	f.row(live, both, snapshot.RowRemoving, e)
	f.row(gone, kept, snapshot.RowReady, e)
	for _, name := range []string{onlyGone, both} {
		if _, err := env.Store.MarkSnapshotRemoving(ctx, name, e); err != nil {
			t.Fatal(err)
		}
	}

	if _, err := env.Store.ForgetRunners(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		exist bool
	}{{onlyGone, false}, {both, true}, {kept, true}} {
		_, err := env.Store.Snapshot(ctx, tc.name)
		if exists := err == nil; exists != tc.exist {
			t.Errorf("snapshot %s exists = %v (%v), want %v", tc.name, exists, err, tc.exist)
		}
	}
}

func TestRetrySnapshotRowsMovesOnlyRowsInError(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	e := time.Date(2004, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := f.snapshot("img", e)
	states := map[string]snapshot.RowState{"a": snapshot.RowError, "b": snapshot.RowReady, "c": snapshot.RowError}
	for name, st := range states {
		f.row(f.register(name, e), ref, snapshot.RowPulling, e)
		if st != snapshot.RowPulling {
			if _, err := env.Store.TransitionSnapshotRunner(ctx, f.id(name), ref, nil, st, "over the quota", e); err != nil {
				t.Fatal(err)
			}
		}
	}
	// c is a build the reconcile gave up retrying.
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE snapshot_runners SET retries = $3 WHERE runner_id = $1 AND snapshot_ref = $2`,
		f.id("c"), ref, snapshot.MaxBuildRetries); err != nil {
		t.Fatal(err)
	}
	later := e.Add(time.Hour)
	n, err := env.Store.RetrySnapshotRows(ctx, ref, later)
	if err != nil || n != 2 {
		t.Fatalf("RetrySnapshotRows = %d, %v; want 2", n, err)
	}
	for name, was := range states {
		row := f.getRow(f.id(name), ref)
		want := was
		if was == snapshot.RowError {
			want = snapshot.RowPulling
		}
		if row.State != want || (was == snapshot.RowError && (row.ErrorReason != "" || !row.UpdatedAt.Equal(later) || row.Retries != 0)) {
			t.Errorf("row on %s = %+v, want %s with no reason and no retries, changed at %v", name, row, want, later)
		}
	}
}

// The reconcile's retries move, in one statement, only the rows still in
// error, counting a retry.
func TestRetryRowsInErrorMovesOnlyRowsStillInError(t *testing.T) {
	ctx := context.Background()
	f := newFleet(t)
	e := time.Date(2005, 1, 1, 0, 0, 0, 0, time.UTC)
	ref := f.snapshot("img", e)
	a, b := f.register("a", e), f.register("b", e)
	for _, id := range []string{a, b} {
		f.row(id, ref, snapshot.RowPulling, e)
	}
	if _, err := env.Store.TransitionSnapshotRunner(ctx, a, ref, nil, snapshot.RowError, snapshot.ReasonOffline, e); err != nil {
		t.Fatal(err)
	}
	later := e.Add(time.Hour)
	moved, err := env.Store.RetryRowsInError(ctx, []snapshot.Row{{RunnerID: a, SnapshotRef: ref}, {RunnerID: b, SnapshotRef: ref}}, later)
	if err != nil || len(moved) != 1 || moved[0].RunnerID != a {
		t.Fatalf("RetryRowsInError = %+v, %v; want the row on a", moved, err)
	}
	if r := f.getRow(a, ref); r.State != snapshot.RowPulling || r.Retries != 1 || r.ErrorReason != "" || !r.UpdatedAt.Equal(later) {
		t.Errorf("row on a = %+v, want pulling, 1 retry, changed at %v", r, later)
	}
	if r := f.getRow(b, ref); r.State != snapshot.RowPulling || r.Retries != 0 || !r.UpdatedAt.Equal(e) {
		t.Errorf("row on b = %+v, want left alone", r)
	}
}

// A pull attempt's count only grows: the runner's writes as bytes arrive,
// a late or repeated one, and the propagation's with the attempt's result
// keep the largest; a run's total sums its attempts, the registry apart
// from the peers, and no other run's. Counts older than ForgetRunners'
// bound go.
func TestPullBytesSumEveryAttemptOfARun(t *testing.T) {
	ctx := context.Background()
	run, other := fmt.Sprintf("run-%d", fleetSeq.Add(1)), fmt.Sprintf("run-%d", fleetSeq.Add(1))
	for _, w := range []struct {
		run, attempt string
		received     map[string]int64
	}{
		{run, "5/1", map[string]int64{snapshot.Registry: 100}},
		{run, "5/1", map[string]int64{snapshot.Registry: 300, "peer:a": 50}}, // the attempt goes on
		{run, "5/1", map[string]int64{snapshot.Registry: 200}},               // a late write
		{run, "5/2", map[string]int64{snapshot.Registry: 1000, "peer:b": 7}}, // the retry
		{run, "9/1", map[string]int64{"peer:a": 40}},                         // another pull
		{other, "5/1", map[string]int64{snapshot.Registry: 1 << 20}},
		{run, "9/2", nil},
	} {
		if err := env.Store.RecordPullBytes(ctx, store.PullAttempt{RunID: w.run, Attempt: w.attempt, RunnerID: "r", Snapshot: "s"}, w.received); err != nil {
			t.Fatal(err)
		}
	}
	registry, peers, err := env.Store.PullBytes(ctx, run)
	if err != nil || registry != 1300 || peers != 97 {
		t.Errorf("PullBytes = %d from the registry, %d from peers (%v); want 1300 and 97", registry, peers, err)
	}
	if _, err := env.Store.Pool().Exec(ctx, `UPDATE snapshot_pull_bytes SET updated_at = now() - interval '8 days' WHERE run_id = $1`, other); err != nil {
		t.Fatal(err)
	}
	if _, err := env.Store.ForgetRunners(ctx, 7*24*time.Hour); err != nil {
		t.Fatal(err)
	}
	if registry, peers, err := env.Store.PullBytes(ctx, other); err != nil || registry != 0 || peers != 0 {
		t.Errorf("a week-old run's counts = %d, %d (%v); want forgotten", registry, peers, err)
	}
	if registry, _, _ := env.Store.PullBytes(ctx, run); registry != 1300 {
		t.Errorf("a recent run's counts went with the old ones: %d", registry)
	}
}
