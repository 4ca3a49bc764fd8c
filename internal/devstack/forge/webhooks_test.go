package forge

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v66/github"
)

const hookSecret = "s3cret-webhook"

// received is one request a test receiver got.
type received struct {
	header  http.Header
	payload []byte
	err     error // github.ValidatePayload's verdict
}

// receiver is a webhook endpoint that checks each request's signature
// with go-github and answers status (200 unless set).
type receiver struct {
	*httptest.Server
	secret string
	mu     sync.Mutex
	got    []received
	status int
}

func newReceiver(t *testing.T, secret string) *receiver {
	t.Helper()
	rc := &receiver{secret: secret, status: http.StatusOK}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		payload, err := github.ValidatePayload(r, []byte(rc.secret))
		rc.mu.Lock()
		rc.got = append(rc.got, received{header: r.Header.Clone(), payload: payload, err: err})
		status := rc.status
		rc.mu.Unlock()
		w.WriteHeader(status)
		_, _ = io.WriteString(w, "answer "+strconv.Itoa(status))
	}))
	t.Cleanup(rc.Close)
	return rc
}

// take returns the requests received since the last take.
func (rc *receiver) take() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := rc.got
	rc.got = nil
	return out
}

func (rc *receiver) setStatus(s int) {
	rc.mu.Lock()
	rc.status = s
	rc.mu.Unlock()
}

var guidRE = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// checkHeaders checks what GitHub's Hookshot sends with every delivery.
func checkHeaders(t *testing.T, f *Forge, app App, r received) {
	t.Helper()
	h := r.header
	if r.err != nil {
		t.Errorf("%s: X-Hub-Signature-256 does not verify: %v", h.Get("X-GitHub-Event"), r.err)
	}
	if err := github.ValidateSignature(h.Get("X-Hub-Signature"), r.payload, []byte(hookSecret)); err != nil || !strings.HasPrefix(h.Get("X-Hub-Signature"), "sha1=") {
		t.Errorf("X-Hub-Signature %q does not verify: %v", h.Get("X-Hub-Signature"), err)
	}
	for k, want := range map[string]string{
		"Content-Type":                           "application/json",
		"X-GitHub-Hook-ID":                       strconv.FormatInt(f.AppWebhookID(app.ID), 10),
		"X-GitHub-Hook-Installation-Target-Type": "integration",
		"X-GitHub-Hook-Installation-Target-ID":   strconv.FormatInt(app.ID, 10),
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if !guidRE.MatchString(h.Get("X-GitHub-Delivery")) {
		t.Errorf("X-GitHub-Delivery %q is not a GUID", h.Get("X-GitHub-Delivery"))
	}
	if !strings.HasPrefix(h.Get("User-Agent"), "GitHub-Hookshot/") {
		t.Errorf("User-Agent %q", h.Get("User-Agent"))
	}
}

// hookFixture is a forge with an App installed on organization acme (all
// its repositories) whose webhook points at a receiver.
type hookFixture struct {
	f    *Forge
	app  App
	inst Installation
	rc   *receiver
}

func newHookFixture(t *testing.T, mod ...func(*Options)) *hookFixture {
	t.Helper()
	f := newForge(t, mod...)
	if err := f.CreateOrg("acme"); err != nil {
		t.Fatal(err)
	}
	app, err := f.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	inst, err := f.InstallApp(app.ID, "acme")
	if err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, hookSecret)
	if err := f.SetAppWebhook(app.ID, rc.URL, hookSecret); err != nil {
		t.Fatal(err)
	}
	return &hookFixture{f: f, app: app, inst: inst, rc: rc}
}

// appClient is go-github authenticated as the App (a JWT valid at now).
func appClient(t *testing.T, f *Forge, app App, now time.Time) *github.Client {
	t.Helper()
	return ghClient(t, f, signJWT(t, app.Key, app.ID, now.Add(-time.Minute), now.Add(9*time.Minute)))
}

// Every kind of event the forge sends reaches the App's webhook once per
// change, signed with the secret (go-github's ValidatePayload), with
// Hookshot's headers, and parses with go-github's ParseWebHook into the
// event type gitfleet reads, carrying the fields it reads. Repositories
// no installation of the App covers send nothing; a suspended
// installation's repositories neither.
func TestAppWebhookEvents(t *testing.T) {
	fx := newHookFixture(t)
	f, app, inst := fx.f, fx.app, fx.inst
	for _, o := range []string{"beta", "zed"} {
		if err := f.CreateOrg(o); err != nil {
			t.Fatal(err)
		}
	}
	w, mainSHA := seeded(t, f, "acme", "widgets")
	seeded(t, f, "acme", "gadgets")
	seeded(t, f, "acme", "old")
	seeded(t, f, "acme", "gone")
	seeded(t, f, "beta", "b1")
	seeded(t, f, "beta", "b2")
	seeded(t, f, "zed", "z") // no installation
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	fx.rc.take() // the pushes of the setup, checked below
	var betaInst Installation
	var last, tagSHA string

	type want struct {
		event, action string
		check         func(t *testing.T, ev any)
	}
	repoIs := func(t *testing.T, r *github.Repository, full string) {
		t.Helper()
		if r.GetFullName() != full || r.GetID() == 0 || r.GetNodeID() == "" || r.GetOwner().GetLogin() == "" ||
			r.GetHTMLURL() == "" || r.GetCloneURL() == "" || r.GetDefaultBranch() == "" {
			t.Errorf("repository = %+v, want %s with id, node_id, owner, html_url, clone_url, default_branch", r, full)
		}
	}
	pushOf := func(t *testing.T, ev any, ref string, created, deleted, forced bool) *github.PushEvent {
		t.Helper()
		p := ev.(*github.PushEvent)
		r := p.GetRepo()
		if p.GetRef() != ref || p.GetCreated() != created || p.GetDeleted() != deleted || p.GetForced() != forced ||
			len(p.GetBefore()) != 40 || len(p.GetAfter()) != 40 {
			t.Errorf("push ref=%s created=%v deleted=%v forced=%v before=%s after=%s, want %s %v %v %v",
				p.GetRef(), p.GetCreated(), p.GetDeleted(), p.GetForced(), p.GetBefore(), p.GetAfter(), ref, created, deleted, forced)
		}
		if r.GetID() == 0 || r.GetNodeID() == "" || r.GetName() == "" || r.GetFullName() == "" || r.GetOwner().GetLogin() == "" ||
			r.GetOwner().GetID() == 0 || r.GetDefaultBranch() == "" || r.GetCloneURL() == "" || r.GetHTMLURL() == "" ||
			r.GetCreatedAt().IsZero() || r.GetPushedAt().IsZero() {
			t.Errorf("push repository = %+v: a field gitfleet reads is missing", r)
		}
		if p.GetInstallation().GetID() == 0 || p.GetSender().GetLogin() == "" {
			t.Errorf("push installation=%v sender=%v", p.GetInstallation(), p.GetSender())
		}
		return p
	}
	actionOf := func(action string) func(*testing.T, any) {
		return func(t *testing.T, ev any) {
			t.Helper()
			e := ev.(*github.RepositoryEvent)
			if e.GetInstallation().GetID() != inst.ID || e.GetSender().GetLogin() == "" {
				t.Errorf("%s: installation %d sender %q", action, e.GetInstallation().GetID(), e.GetSender().GetLogin())
			}
		}
	}

	steps := []struct {
		name string
		do   func() error
		want []want
	}{
		{"push to an existing branch", func() (err error) {
			last, err = f.Commit("acme", "widgets", "main", map[string]string{"a.txt": "a"}, "add a")
			return err
		}, []want{{"push", "", func(t *testing.T, ev any) {
			p := pushOf(t, ev, "refs/heads/main", false, false, false)
			if p.GetBefore() != mainSHA || p.GetAfter() != last || p.GetRepo().GetID() != w.ID ||
				p.GetRepo().GetFullName() != "acme/widgets" || p.GetRepo().GetPrivate() || p.GetRepo().GetArchived() ||
				p.GetInstallation().GetID() != inst.ID || p.GetSender().GetLogin() != "acme" {
				t.Errorf("push = %v", p)
			}
			if hc := p.GetHeadCommit(); hc.GetID() != last || !slices.Equal(hc.Added, []string{"a.txt"}) || hc.GetMessage() != "add a" {
				t.Errorf("head_commit = %v", hc)
			}
		}}}},
		{"push modifying and removing files", func() (err error) {
			last, err = f.Commit("acme", "widgets", "main", map[string]string{"a.txt": DeleteFile, "README.md": "changed\n"}, "edit\n\nbody")
			return err
		}, []want{{"push", "", func(t *testing.T, ev any) {
			hc := pushOf(t, ev, "refs/heads/main", false, false, false).GetHeadCommit()
			if hc.GetID() != last || len(hc.Added) != 0 || !slices.Equal(hc.Removed, []string{"a.txt"}) ||
				!slices.Equal(hc.Modified, []string{"README.md"}) || hc.GetMessage() != "edit\n\nbody" || len(hc.GetTreeID()) != 40 ||
				hc.GetAuthor().GetName() != "Forge Bot" || hc.GetTimestamp().IsZero() {
				t.Errorf("head_commit = %v", hc)
			}
		}}}},
		{"push creating a branch", func() error {
			_, err := f.Commit("acme", "widgets", "feature", map[string]string{"b.txt": "b"}, "add b")
			return err
		}, []want{
			{"push", "", func(t *testing.T, ev any) {
				if p := pushOf(t, ev, "refs/heads/feature", true, false, false); p.GetBefore() != zeroOID {
					t.Errorf("before = %s, want zeros", p.GetBefore())
				}
			}},
			{"create", "", func(t *testing.T, ev any) {
				e := ev.(*github.CreateEvent)
				if e.GetRef() != "feature" || e.GetRefType() != "branch" || e.GetInstallation().GetID() != inst.ID {
					t.Errorf("create = %v", e)
				}
				repoIs(t, e.GetRepo(), "acme/widgets")
			}},
		}},
		{"force push", func() error {
			_, err := f.ForcePush("acme", "widgets", "main", map[string]string{"new.txt": "n"}, "rewrite")
			return err
		}, []want{{"push", "", func(t *testing.T, ev any) {
			if p := pushOf(t, ev, "refs/heads/main", false, false, true); p.GetBefore() != last ||
				!slices.Equal(p.GetHeadCommit().Added, []string{"new.txt"}) || len(p.Commits) != 1 {
				t.Errorf("before = %s head_commit %v, want %s and a root commit adding new.txt", p.GetBefore(), p.GetHeadCommit(), last)
			}
		}}}},
		{"delete a branch", func() error { return f.DeleteBranch("acme", "widgets", "feature") }, []want{
			{"push", "", func(t *testing.T, ev any) {
				if p := pushOf(t, ev, "refs/heads/feature", false, true, false); p.GetAfter() != zeroOID || p.HeadCommit != nil {
					t.Errorf("after = %s head_commit %v, want zeros and none", p.GetAfter(), p.HeadCommit)
				}
			}},
			{"delete", "", func(t *testing.T, ev any) {
				e := ev.(*github.DeleteEvent)
				if e.GetRef() != "feature" || e.GetRefType() != "branch" || e.GetInstallation().GetID() != inst.ID {
					t.Errorf("delete = %v", e)
				}
				repoIs(t, e.GetRepo(), "acme/widgets")
			}},
		}},
		{"create a tag", func() (err error) {
			tagSHA, err = f.CreateTag("acme", "widgets", "v1", "")
			return err
		}, []want{
			{"push", "", func(t *testing.T, ev any) {
				if p := pushOf(t, ev, "refs/tags/v1", true, false, false); p.GetAfter() != tagSHA {
					t.Errorf("after = %s, want %s", p.GetAfter(), tagSHA)
				}
			}},
			{"create", "", func(t *testing.T, ev any) {
				if e := ev.(*github.CreateEvent); e.GetRef() != "v1" || e.GetRefType() != "tag" {
					t.Errorf("create = %v", e)
				}
			}},
		}},
		{"delete a tag", func() error { return f.DeleteTag("acme", "widgets", "v1") }, []want{
			{"push", "", func(t *testing.T, ev any) { pushOf(t, ev, "refs/tags/v1", false, true, false) }},
			{"delete", "", func(t *testing.T, ev any) {
				if e := ev.(*github.DeleteEvent); e.GetRef() != "v1" || e.GetRefType() != "tag" {
					t.Errorf("delete = %v", e)
				}
			}},
		}},
		{"create a repository", func() error {
			_, err := f.CreateRepo("acme", "fresh")
			return err
		}, []want{{"repository", "created", func(t *testing.T, ev any) {
			repoIs(t, ev.(*github.RepositoryEvent).GetRepo(), "acme/fresh")
			actionOf("created")(t, ev)
		}}}},
		{"import a branch and a tag", func() error {
			stream := "blob\nmark :1\ndata 3\nimp\n" +
				"commit refs/heads/imported\nmark :2\ncommitter Gen <gen@example.invalid> 1700000000 +0000\ndata 3\nimp\nM 100644 :1 imp.txt\n\n" +
				"reset refs/tags/imp\nfrom :2\n\n"
			return f.Import("acme", "widgets", strings.NewReader(stream))
		}, []want{
			{"push", "", func(t *testing.T, ev any) {
				if p := pushOf(t, ev, "refs/heads/imported", true, false, false); p.GetHeadCommit().GetMessage() != "imp" {
					t.Errorf("head_commit = %v", p.GetHeadCommit())
				}
			}},
			{"create", "", func(t *testing.T, ev any) {
				if e := ev.(*github.CreateEvent); e.GetRef() != "imported" || e.GetRefType() != "branch" {
					t.Errorf("create = %v", e)
				}
			}},
			{"push", "", func(t *testing.T, ev any) { pushOf(t, ev, "refs/tags/imp", true, false, false) }},
			{"create", "", func(t *testing.T, ev any) {
				if e := ev.(*github.CreateEvent); e.GetRef() != "imp" || e.GetRefType() != "tag" {
					t.Errorf("create = %v", e)
				}
			}},
		}},
		{"rename", func() error { return f.Rename("acme", "old", "new") }, []want{{"repository", "renamed", func(t *testing.T, ev any) {
			e := ev.(*github.RepositoryEvent)
			repoIs(t, e.GetRepo(), "acme/new")
			if e.GetChanges().GetRepo().GetName().GetFrom() != "old" {
				t.Errorf("changes = %v, want repository.name.from old", e.GetChanges())
			}
			actionOf("renamed")(t, ev)
		}}}},
		{"transfer out of the installation", func() error { return f.Transfer("acme", "new", "zed") }, []want{{"repository", "transferred", func(t *testing.T, ev any) {
			e := ev.(*github.RepositoryEvent)
			repoIs(t, e.GetRepo(), "zed/new")
			if from := e.GetChanges().GetOwner().GetOwnerInfo().GetOrg(); from.GetLogin() != "acme" || from.GetID() == 0 {
				t.Errorf("changes.owner.from.organization = %v, want acme", from)
			}
			actionOf("transferred")(t, ev)
		}}}},
		{"privatize", func() error { return f.SetPrivate("acme", "gadgets", true) }, []want{{"repository", "privatized", func(t *testing.T, ev any) {
			if e := ev.(*github.RepositoryEvent); !e.GetRepo().GetPrivate() {
				t.Errorf("repository not private: %v", e.GetRepo())
			}
			actionOf("privatized")(t, ev)
		}}}},
		{"privatize again: no change, no event", func() error { return f.SetPrivate("acme", "gadgets", true) }, nil},
		{"publicize", func() error { return f.SetPrivate("acme", "gadgets", false) }, []want{{"repository", "publicized", actionOf("publicized")}}},
		{"archive", func() error { return f.SetArchived("acme", "gadgets", true) }, []want{{"repository", "archived", func(t *testing.T, ev any) {
			if e := ev.(*github.RepositoryEvent); !e.GetRepo().GetArchived() {
				t.Errorf("repository not archived: %v", e.GetRepo())
			}
		}}}},
		{"unarchive", func() error { return f.SetArchived("acme", "gadgets", false) }, []want{{"repository", "unarchived", actionOf("unarchived")}}},
		{"default branch", func() error { return f.SetDefaultBranch("acme", "gadgets", "dev") }, []want{{"repository", "edited", func(t *testing.T, ev any) {
			if e := ev.(*github.RepositoryEvent); e.GetChanges().GetDefaultBranch().GetFrom() != "main" || e.GetRepo().GetDefaultBranch() != "dev" {
				t.Errorf("edited = %v", e)
			}
		}}}},
		{"delete a repository", func() error { return f.Delete("acme", "gone") }, []want{{"repository", "deleted", func(t *testing.T, ev any) {
			repoIs(t, ev.(*github.RepositoryEvent).GetRepo(), "acme/gone")
			actionOf("deleted")(t, ev)
		}}}},
		{"a repository no installation covers", func() error {
			_, err := f.Commit("zed", "z", "main", map[string]string{"x": "x"}, "x")
			return err
		}, nil},
		{"install on beta with b1", func() (err error) {
			betaInst, err = f.InstallApp(app.ID, "beta", "b1")
			return err
		}, []want{{"installation", "created", func(t *testing.T, ev any) {
			e := ev.(*github.InstallationEvent)
			if e.GetInstallation().GetID() != betaInst.ID || e.GetInstallation().GetAccount().GetLogin() != "beta" ||
				e.GetInstallation().GetAppID() != app.ID || len(e.Repositories) != 1 || e.Repositories[0].GetFullName() != "beta/b1" {
				t.Errorf("installation created = %v", e)
			}
		}}}},
		{"select b1 and b2", func() error { return f.SetInstallationRepos(betaInst.ID, "b1", "b2") }, []want{{"installation_repositories", "added", func(t *testing.T, ev any) {
			e := ev.(*github.InstallationRepositoriesEvent)
			if e.GetInstallation().GetID() != betaInst.ID || len(e.RepositoriesAdded) != 1 || e.RepositoriesAdded[0].GetFullName() != "beta/b2" ||
				e.RepositoriesAdded[0].GetID() == 0 || len(e.RepositoriesRemoved) != 0 || e.GetRepositorySelection() != "selected" {
				t.Errorf("added = %v", e)
			}
		}}}},
		{"select b2 only", func() error { return f.SetInstallationRepos(betaInst.ID, "b2") }, []want{{"installation_repositories", "removed", func(t *testing.T, ev any) {
			e := ev.(*github.InstallationRepositoriesEvent)
			if len(e.RepositoriesRemoved) != 1 || e.RepositoriesRemoved[0].GetFullName() != "beta/b1" || len(e.RepositoriesAdded) != 0 {
				t.Errorf("removed = %v", e)
			}
		}}}},
		{"suspend", func() error { return f.SuspendInstallation(betaInst.ID, true) }, []want{{"installation", "suspend", func(t *testing.T, ev any) {
			if e := ev.(*github.InstallationEvent); e.GetInstallation().GetSuspendedAt().IsZero() || e.GetInstallation().GetID() != betaInst.ID {
				t.Errorf("suspend = %v", e)
			}
		}}}},
		{"a suspended installation's repository", func() error {
			_, err := f.Commit("beta", "b2", "main", map[string]string{"x": "x"}, "x")
			return err
		}, nil},
		{"unsuspend", func() error { return f.SuspendInstallation(betaInst.ID, false) }, []want{{"installation", "unsuspend", nil}}},
		{"uninstall", func() error { return f.Uninstall(betaInst.ID) }, []want{{"installation", "deleted", func(t *testing.T, ev any) {
			e := ev.(*github.InstallationEvent)
			if e.GetInstallation().GetID() != betaInst.ID || len(e.Repositories) != 1 || e.Repositories[0].GetFullName() != "beta/b2" {
				t.Errorf("deleted = %v", e)
			}
		}}}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			before := len(f.HookDeliveries())
			if err := st.do(); err != nil {
				t.Fatal(err)
			}
			if err := f.WaitHooks(ctx(t)); err != nil {
				t.Fatal(err)
			}
			got := fx.rc.take()
			var kinds, wantKinds []string
			for _, r := range got {
				kinds = append(kinds, r.header.Get("X-GitHub-Event"))
			}
			for _, w := range st.want {
				wantKinds = append(wantKinds, w.event)
			}
			if !slices.Equal(kinds, wantKinds) {
				t.Fatalf("events %v, want %v", kinds, wantKinds)
			}
			recs := f.HookDeliveries()[before:]
			if len(recs) != len(got) {
				t.Fatalf("%d deliveries recorded, %d received", len(recs), len(got))
			}
			for i, r := range got {
				checkHeaders(t, f, app, r)
				ev, err := github.ParseWebHook(r.header.Get("X-GitHub-Event"), r.payload)
				if err != nil {
					t.Fatalf("ParseWebHook(%s): %v", r.header.Get("X-GitHub-Event"), err)
				}
				var action string
				switch e := ev.(type) {
				case *github.RepositoryEvent:
					action = e.GetAction()
				case *github.InstallationEvent:
					action = e.GetAction()
				case *github.InstallationRepositoriesEvent:
					action = e.GetAction()
				}
				if action != st.want[i].action {
					t.Errorf("%s action %q, want %q", kinds[i], action, st.want[i].action)
				}
				if st.want[i].check != nil {
					st.want[i].check(t, ev)
				}
				d := recs[i]
				if d.GUID != r.header.Get("X-GitHub-Delivery") || d.Event != kinds[i] || d.Action != action ||
					d.Status != "OK" || d.StatusCode != 200 || d.Redelivery || string(d.ResponseBody) != "answer 200" {
					t.Errorf("delivery record = %+v", d)
				}
			}
		})
	}
	c := f.HookCounts()
	if c.InFlight != 0 || c.Failed != 0 || c.Delivered != int64(len(f.HookDeliveries())) || c.Queued != c.Delivered {
		t.Errorf("counts = %+v, %d deliveries", c, len(f.HookDeliveries()))
	}
}

// One repository's events are delivered in the order they happened, even
// when many are queued at once: each push's before is the previous one's
// after.
func TestAppWebhookOrderPerRepository(t *testing.T) {
	fx := newHookFixture(t)
	f := fx.f
	_, prev := seeded(t, f, "acme", "busy")
	seeded(t, f, "acme", "other")
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	fx.rc.take()
	for i := range 20 {
		for _, repo := range []string{"busy", "other"} {
			if _, err := f.Commit("acme", repo, "main", map[string]string{"n": strconv.Itoa(i)}, "n"); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range fx.rc.take() {
		ev, err := github.ParseWebHook("push", r.payload)
		if err != nil {
			t.Fatal(err)
		}
		p := ev.(*github.PushEvent)
		if p.GetRepo().GetName() != "busy" {
			continue
		}
		if p.GetBefore() != prev {
			t.Fatalf("push %d: before %s, want the previous push's after %s", n, p.GetBefore(), prev)
		}
		prev = p.GetAfter()
		n++
	}
	if n != 20 {
		t.Fatalf("%d pushes to busy delivered, want 20", n)
	}

	// Deliveries that finished concurrently still page without gaps or
	// repeats: newest first, every one once.
	gh := appClient(t, f, fx.app, time.Now())
	var ids []int64
	opts := &github.ListCursorOptions{PerPage: 7}
	for {
		page, resp, err := gh.Apps.ListHookDeliveries(ctx(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range page {
			ids = append(ids, d.GetID())
		}
		if resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	all := f.HookDeliveries()
	if len(ids) != len(all) {
		t.Fatalf("listed %d deliveries, recorded %d", len(ids), len(all))
	}
	for i, id := range ids {
		if id != all[len(all)-1-i].ID {
			t.Fatalf("listed ids %v, want the recorded ones newest first", ids)
		}
	}
}

// The App reads and changes its webhook through go-github (the secret is
// never shown); a forge that was closed sends nothing more.
func TestAppWebhookConfig(t *testing.T) {
	fx := newHookFixture(t)
	f, app := fx.f, fx.app
	gh := appClient(t, f, app, time.Now())
	cfg, _, err := gh.Apps.GetHookConfig(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.GetURL() != fx.rc.URL || cfg.GetSecret() != "********" || cfg.GetContentType() != "json" {
		t.Errorf("config = %v", cfg)
	}
	other := newReceiver(t, "another-secret")
	if _, _, err := gh.Apps.UpdateHookConfig(ctx(t), &github.HookConfig{URL: github.String(other.URL), Secret: github.String("another-secret")}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := gh.Apps.UpdateHookConfig(ctx(t), &github.HookConfig{URL: github.String("ftp://nope")}); err == nil {
		t.Error("a non-HTTP URL was accepted")
	}
	seeded(t, f, "acme", "r")
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got := other.take()
	if len(got) != 3 || got[0].err != nil || got[1].err != nil || got[2].err != nil || len(fx.rc.take()) != 0 {
		t.Fatalf("the new receiver got %d requests (%v), want repository, push and create signed with the new secret", len(got), got)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.SetPrivate("acme", "r", true); err != nil {
		t.Fatal(err)
	}
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if n, c := len(other.take()), f.HookCounts(); n != 0 || c.Dropped != 1 {
		t.Errorf("after Close: %d delivered, counts %+v; want none, 1 dropped", n, c)
	}
}

// A receiver that answers 503, one that refuses connections and one that
// does not answer within the timeout are recorded as failed deliveries
// with GitHub's status texts; the App lists them through go-github
// (newest first, cursor pages), reads one with its request and response,
// and redelivers each: the same GUID and payload arrive again, signed,
// with redelivery true, recorded as new deliveries. Nothing is retried
// by itself.
func TestAppWebhookFailuresAndRedelivery(t *testing.T) {
	fx := newHookFixture(t)
	f, app := fx.f, fx.app
	seeded(t, f, "acme", "r")
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	fx.rc.take()
	refused := httptest.NewServer(http.NotFoundHandler())
	refusedURL := refused.URL
	refused.Close()
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) }) // runs first: lets hang close

	cases := []struct {
		name       string
		setup      func()
		status     string
		statusCode int
	}{
		{"503", func() { fx.rc.setStatus(http.StatusServiceUnavailable) }, "Invalid HTTP Response: 503", 503},
		{"connection refused", func() {
			if err := f.SetAppWebhook(app.ID, refusedURL, hookSecret); err != nil {
				t.Fatal(err)
			}
		}, "failed to connect to host", 0},
		{"timeout", func() {
			f.hooks.mu.Lock()
			f.hooks.timeout = 300 * time.Millisecond
			f.hooks.mu.Unlock()
			if err := f.SetAppWebhook(app.ID, hang.URL, hookSecret); err != nil {
				t.Fatal(err)
			}
		}, "timed out", 0},
	}
	var failed []HookDelivery
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			tc.setup()
			if _, err := f.Commit("acme", "r", "main", map[string]string{"f": strconv.Itoa(i)}, "f"); err != nil {
				t.Fatal(err)
			}
			if err := f.WaitHooks(ctx(t)); err != nil {
				t.Fatal(err)
			}
			ds := f.HookDeliveries()
			d := ds[len(ds)-1]
			if d.Status != tc.status || d.StatusCode != tc.statusCode || d.OK() || d.Event != "push" {
				t.Fatalf("delivery = status %q code %d event %s, want %q %d push", d.Status, d.StatusCode, d.Event, tc.status, tc.statusCode)
			}
			failed = append(failed, d)
		})
	}
	if len(failed) != len(cases) {
		t.Fatal("a case failed")
	}
	if got := fx.rc.take(); len(got) != 1 || got[0].err != nil {
		t.Fatalf("the 503 receiver got %d requests (no automatic retry), signature error %v", len(got), got)
	}
	fx.rc.setStatus(http.StatusOK)
	if err := f.SetAppWebhook(app.ID, fx.rc.URL, hookSecret); err != nil {
		t.Fatal(err)
	}

	gh := appClient(t, f, app, time.Now())
	// Newest first, one per page, following the cursor.
	var listed []*github.HookDelivery
	opts := &github.ListCursorOptions{PerPage: 1}
	for {
		page, resp, err := gh.Apps.ListHookDeliveries(ctx(t), opts)
		if err != nil {
			t.Fatal(err)
		}
		listed = append(listed, page...)
		if resp.Cursor == "" {
			break
		}
		opts.Cursor = resp.Cursor
	}
	all := f.HookDeliveries()
	if len(listed) != len(all) {
		t.Fatalf("listed %d deliveries, want %d", len(listed), len(all))
	}
	for i, d := range listed {
		want := all[len(all)-1-i]
		if d.GetID() != want.ID || d.GetGUID() != want.GUID || d.GetStatus() != want.Status || d.GetStatusCode() != want.StatusCode ||
			d.GetEvent() != want.Event || d.GetRepositoryID() != want.RepositoryID || d.GetInstallationID() != fx.inst.ID ||
			d.GetDeliveredAt().IsZero() || d.GetRedelivery() {
			t.Errorf("listed[%d] = %v, want %+v", i, d, want)
		}
	}
	bad, _, err := gh.Apps.ListHookDeliveries(ctx(t), &github.ListCursorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var failures []int64
	for _, d := range bad {
		if d.GetStatusCode() < 200 || d.GetStatusCode() > 299 {
			failures = append(failures, d.GetID())
		}
	}
	if len(failures) != len(cases) {
		t.Fatalf("failed deliveries listed: %v, want %d", failures, len(cases))
	}

	one, _, err := gh.Apps.GetHookDelivery(ctx(t), failed[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	ev, err := one.ParseRequestPayload()
	if err != nil {
		t.Fatalf("ParseRequestPayload: %v", err)
	}
	if p, ok := ev.(*github.PushEvent); !ok || p.GetRepo().GetFullName() != "acme/r" {
		t.Errorf("request payload = %v", ev)
	}
	if one.GetRequest().Headers["X-GitHub-Delivery"] != failed[0].GUID || one.GetResponse() == nil ||
		string(*one.GetResponse().RawPayload) != `"answer 503"` {
		t.Errorf("delivery request/response = %v / %v", one.GetRequest(), one.GetResponse())
	}

	for _, d := range failed {
		_, _, err := gh.Apps.RedeliverHookDelivery(ctx(t), d.ID)
		var acc *github.AcceptedError
		if !errors.As(err, &acc) {
			t.Fatalf("RedeliverHookDelivery(%d): %v, want 202 Accepted", d.ID, err)
		}
	}
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	got := fx.rc.take()
	if len(got) != len(failed) {
		t.Fatalf("%d redeliveries received, want %d", len(got), len(failed))
	}
	for i, r := range got {
		checkHeaders(t, f, app, r)
		if r.header.Get("X-GitHub-Delivery") != failed[i].GUID || string(r.payload) != string(failed[i].Payload) {
			t.Errorf("redelivery %d: GUID %s payload changed, want %s", i, r.header.Get("X-GitHub-Delivery"), failed[i].GUID)
		}
	}
	after := f.HookDeliveries()
	for i, d := range after[len(all):] {
		if !d.Redelivery || d.GUID != failed[i].GUID || d.ID == failed[i].ID || d.Status != "OK" {
			t.Errorf("redelivery record %+v", d)
		}
	}
	if c := f.HookCounts(); c.Redelivered != int64(len(failed)) || c.Failed != int64(len(failed)) {
		t.Errorf("counts = %+v", c)
	}
	if _, _, err := gh.Apps.GetHookDelivery(ctx(t), 1); err == nil {
		t.Error("GetHookDelivery of an unknown id: no error, want 404")
	}
}

// Deliveries older than GitHub's three days (by the forge's clock) are
// neither listed nor readable nor redeliverable (404), and another App
// sees none of them.
func TestAppWebhookRetention(t *testing.T) {
	clock := &fakeClock{t: time.Now()}
	fx := newHookFixture(t, func(o *Options) { o.Now = clock.Now })
	f, app := fx.f, fx.app
	seeded(t, f, "acme", "r")
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
	ds := f.HookDeliveries()
	if len(ds) != 3 { // repository created, push and create of main
		t.Fatalf("%d deliveries, want 3", len(ds))
	}
	other, err := f.CreateApp("other")
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		advance time.Duration
		app     App
		visible bool
	}{
		{"fresh", 0, app, true},
		{"another App", 0, other, false},
		{"just inside three days", HookRetention - time.Minute, app, true},
		{"past three days", 2 * time.Minute, app, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clock.Add(tc.advance)
			gh := appClient(t, f, tc.app, clock.Now())
			list, _, err := gh.Apps.ListHookDeliveries(ctx(t), nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _, getErr := gh.Apps.GetHookDelivery(ctx(t), ds[0].ID)
			_, resp, redErr := gh.Apps.RedeliverHookDelivery(ctx(t), ds[0].ID)
			if err := f.WaitHooks(ctx(t)); err != nil {
				t.Fatal(err)
			}
			listed := slices.ContainsFunc(list, func(d *github.HookDelivery) bool { return d.GetID() == ds[0].ID })
			var acc *github.AcceptedError
			if tc.visible {
				if !listed || getErr != nil || !errors.As(redErr, &acc) {
					t.Fatalf("listed %v, get %v, redeliver %v; want listed, ok, 202", listed, getErr, redErr)
				}
				return
			}
			if listed || getErr == nil || resp == nil || resp.StatusCode != http.StatusNotFound {
				t.Fatalf("listed %v, get %v, redeliver %v; want not listed and 404s", listed, getErr, redErr)
			}
			for _, d := range list {
				if d.GetDeliveredAt().Before(clock.Now().Add(-HookRetention)) {
					t.Errorf("delivery %d from %v listed at %v", d.GetID(), d.GetDeliveredAt(), clock.Now())
				}
			}
		})
	}
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// A suspended installation's tokens stop working and no new one is
// minted (403), until the suspension is lifted.
func TestSuspendInstallation(t *testing.T) {
	fx := newHookFixture(t)
	f, app, inst := fx.f, fx.app, fx.inst
	now := time.Now()
	jwt := "Bearer " + signJWT(t, app.Key, app.ID, now.Add(-time.Minute), now.Add(9*time.Minute))
	path := "app/installations/" + strconv.FormatInt(inst.ID, 10) + "/access_tokens"
	st, body := apiDo(t, f, "POST", path, jwt)
	if st != http.StatusCreated {
		t.Fatalf("token: %d %v", st, body)
	}
	tok := "token " + body["token"].(string)
	cases := []struct {
		suspend        bool
		mint, useToken int
	}{
		{true, http.StatusForbidden, http.StatusUnauthorized},
		{false, http.StatusCreated, http.StatusOK},
	}
	for _, tc := range cases {
		if err := f.SuspendInstallation(inst.ID, tc.suspend); err != nil {
			t.Fatal(err)
		}
		if st, body := apiDo(t, f, "POST", path, jwt); st != tc.mint {
			t.Errorf("suspended=%v: mint %d %v, want %d", tc.suspend, st, body, tc.mint)
		}
		if st, _ := apiDo(t, f, "GET", "installation/repositories", tok); st != tc.useToken {
			t.Errorf("suspended=%v: token answered %d, want %d", tc.suspend, st, tc.useToken)
		}
	}
	if err := f.SuspendInstallation(999, true); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown installation: %v", err)
	}
	if err := f.WaitHooks(ctx(t)); err != nil {
		t.Fatal(err)
	}
}
