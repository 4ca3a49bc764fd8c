package forge

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// GitHub App webhooks: an App has one webhook (a URL and a secret,
// SetAppWebhook). The forge sends it the events of the repositories one of
// its installations covers and the events of its installations, the way
// GitHub's Hookshot does: asynchronously (in order per repository or per
// installation, different ones concurrently), one POST per event signed
// with HMAC-SHA256 (and SHA-1) of the body, a 10 s timeout and no
// automatic retry. Every attempt is recorded and served by the App's
// deliveries API (api_hooks.go) for three days by the forge's clock, where
// a failed one can be redelivered.

// HookRetention is how long deliveries are listed and can be redelivered
// (GitHub keeps an App's recent deliveries for three days).
const HookRetention = 72 * time.Hour

// HookTimeout is how long a delivery waits for the receiver (GitHub's 10 s).
const HookTimeout = 10 * time.Second

// hookConcurrency bounds the deliveries in flight at once (across
// repositories; one repository's are sent one after another).
const hookConcurrency = 16

// hookBodyCap bounds the receiver's response body kept in a delivery.
const hookBodyCap = 64 << 10

// hookUserAgent is Hookshot's User-Agent (GitHub-Hookshot/<short hex>).
const hookUserAgent = "GitHub-Hookshot/f0e1d2c"

// HookDelivery is one attempt to deliver an event to an App's webhook.
type HookDelivery struct {
	ID     int64
	GUID   string // X-GitHub-Delivery; a redelivery keeps the original's
	AppID  int64
	HookID int64
	URL    string
	// DeliveredAt is when the attempt started, by the forge's clock.
	DeliveredAt time.Time
	Redelivery  bool
	Duration    time.Duration
	// Status is "OK" for a 2xx answer, "Invalid HTTP Response: <code>"
	// for another, "timed out" or "failed to connect to host" when there
	// was no answer (StatusCode 0).
	Status         string
	StatusCode     int
	Event          string
	Action         string // "" for events without one (push, create, delete)
	InstallationID int64
	RepositoryID   int64 // 0 for installation events
	// The request as sent and the answer as received (its body cut at
	// 64 KiB).
	RequestHeaders  map[string]string
	Payload         []byte
	ResponseHeaders map[string]string
	ResponseBody    []byte
}

// OK reports a delivery the receiver answered 2xx.
func (d HookDelivery) OK() bool { return d.StatusCode >= 200 && d.StatusCode < 300 }

// HookCounts counts webhook deliveries since the forge started.
type HookCounts struct {
	Queued      int64 // events queued for delivery (redeliveries included)
	Delivered   int64 // attempts answered 2xx
	Failed      int64 // attempts answered otherwise or not at all
	Redelivered int64 // redeliveries asked through the API
	Dropped     int64 // queued, not sent: the webhook was turned off or the forge closed
	InFlight    int64 // queued or being sent now
}

// appHook is an App's webhook configuration.
type appHook struct {
	id     int64
	url    string
	secret string
}

// hookJob is one event to deliver.
type hookJob struct {
	appID, instID, repoID int64
	event, action, guid   string
	payload               []byte
	redelivery            bool
}

// hookState holds the webhooks, the delivery queues and the record of
// deliveries. Its zero value is ready. Lock order: the accounts' and the
// registry's locks are never taken while mu is held.
type hookState struct {
	mu         sync.Mutex
	active     atomic.Int64 // Apps with a webhook URL: nothing to do when 0
	nextHookID int64
	nextID     int64
	hooks      map[int64]*appHook // by App id
	suspended  map[int64]time.Time
	queues     map[string][]*hookJob // by ordering key; present while drained
	pending    int64
	idle       chan struct{} // closed when pending drops to 0
	sem        chan struct{}
	done       []*HookDelivery // in id order
	byID       map[int64]*HookDelivery
	counts     HookCounts
	// timeout overrides HookTimeout (tests).
	timeout time.Duration
}

// SetAppWebhook sets an App's webhook: the URL events are POSTed to and
// the secret they are signed with ("" signs nothing, as on GitHub). An
// empty url turns the webhook off (events are no longer queued). The hook
// keeps its id across changes.
func (f *Forge) SetAppWebhook(appID int64, hookURL, secret string) error {
	if hookURL != "" {
		u, err := url.Parse(hookURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("forge: webhook URL %q: must be an absolute http(s) URL", hookURL)
		}
	}
	f.acct.mu.RLock()
	a := f.acct.apps[appID]
	f.acct.mu.RUnlock()
	if a == nil {
		return fmt.Errorf("forge: app %d: %w", appID, ErrNotFound)
	}
	h := &f.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.hooks == nil {
		h.hooks = map[int64]*appHook{}
	}
	cfg := h.hooks[appID]
	if cfg == nil {
		h.nextHookID++
		cfg = &appHook{id: 400000000 + h.nextHookID}
		h.hooks[appID] = cfg
	}
	if (cfg.url != "") != (hookURL != "") {
		if hookURL != "" {
			h.active.Add(1)
		} else {
			h.active.Add(-1)
		}
	}
	cfg.url, cfg.secret = hookURL, secret
	return nil
}

// AppWebhookID is the id of an App's webhook (X-GitHub-Hook-ID), 0 before
// SetAppWebhook.
func (f *Forge) AppWebhookID(appID int64) int64 {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	if cfg := f.hooks.hooks[appID]; cfg != nil {
		return cfg.id
	}
	return 0
}

// hookConfig is an App's current webhook (zero when off).
func (h *hookState) config(appID int64) appHook {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cfg := h.hooks[appID]; cfg != nil {
		return *cfg
	}
	return appHook{}
}

func (h *hookState) isSuspended(instID int64) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, s := h.suspended[instID]
	return s
}

// SuspendInstallation suspends an installation (its tokens stop working,
// new ones are refused with 403 "This installation has been suspended",
// its repositories' events are no longer sent) or lifts the suspension,
// and sends the App the installation event "suspend" or "unsuspend".
func (f *Forge) SuspendInstallation(installationID int64, suspend bool) error {
	f.acct.mu.RLock()
	in := f.acct.installs[installationID]
	f.acct.mu.RUnlock()
	if in == nil {
		return fmt.Errorf("forge: installation %d: %w", installationID, ErrNotFound)
	}
	h := &f.hooks
	h.mu.Lock()
	_, was := h.suspended[installationID]
	if suspend && !was {
		if h.suspended == nil {
			h.suspended = map[int64]time.Time{}
		}
		h.suspended[installationID] = f.now().UTC().Truncate(time.Second)
	} else if !suspend && was {
		delete(h.suspended, installationID)
	}
	h.mu.Unlock()
	if suspend == was {
		return nil
	}
	action := "suspend"
	if !suspend {
		action = "unsuspend"
	}
	f.emitInstallation(in, action, f.grantedRepos(in))
	return nil
}

// installationSuspended reports a suspended installation (nil: no).
func (f *Forge) installationSuspended(in *installState) bool {
	return in != nil && f.hooks.isSuspended(in.id)
}

// HookDeliveries is a snapshot of every delivery attempt so far, oldest
// first (retention does not apply here).
func (f *Forge) HookDeliveries() []HookDelivery {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	out := make([]HookDelivery, len(f.hooks.done))
	for i, d := range f.hooks.done {
		out[i] = *d
	}
	return out
}

// HookCounts reports the delivery counters.
func (f *Forge) HookCounts() HookCounts {
	f.hooks.mu.Lock()
	defer f.hooks.mu.Unlock()
	c := f.hooks.counts
	c.InFlight = f.hooks.pending
	return c
}

// WaitHooks returns once no delivery is queued or in flight (every event
// emitted before the call has been attempted and recorded), or with the
// context's error.
func (f *Forge) WaitHooks(ctx context.Context) error {
	h := &f.hooks
	for {
		h.mu.Lock()
		if h.pending == 0 {
			h.mu.Unlock()
			return nil
		}
		if h.idle == nil {
			h.idle = make(chan struct{})
		}
		ch := h.idle
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// enqueue queues a job behind the others of its key (a repository or an
// installation), so one repository's events arrive in the order they
// happened.
func (f *Forge) enqueue(key string, j *hookJob) {
	h := &f.hooks
	h.mu.Lock()
	h.pending++
	h.counts.Queued++
	if h.queues == nil {
		h.queues = map[string][]*hookJob{}
	}
	if h.sem == nil {
		h.sem = make(chan struct{}, hookConcurrency)
	}
	q, running := h.queues[key]
	h.queues[key] = append(q, j)
	h.mu.Unlock()
	if !running {
		go f.drain(key)
	}
}

// drain sends a key's jobs one after another until its queue is empty.
func (f *Forge) drain(key string) {
	h := &f.hooks
	for {
		h.mu.Lock()
		q := h.queues[key]
		if len(q) == 0 {
			delete(h.queues, key)
			h.mu.Unlock()
			return
		}
		j := q[0]
		q[0] = nil
		h.queues[key] = q[1:]
		sem := h.sem
		h.mu.Unlock()

		sem <- struct{}{}
		d := f.deliver(j)
		<-sem

		h.mu.Lock()
		if d != nil {
			// Ids are given as attempts are recorded, so done is in id
			// order and the API's cursor (an id) pages without gaps.
			h.nextID++
			d.ID = 7000000000 + h.nextID
			if h.byID == nil {
				h.byID = map[int64]*HookDelivery{}
			}
			h.byID[d.ID] = d
			h.done = append(h.done, d)
			if d.OK() {
				h.counts.Delivered++
			} else {
				h.counts.Failed++
			}
		} else {
			h.counts.Dropped++
		}
		h.pending--
		if h.pending == 0 && h.idle != nil {
			close(h.idle)
			h.idle = nil
		}
		h.mu.Unlock()
	}
}

// deliver makes one attempt (nil when the webhook was turned off since).
func (f *Forge) deliver(j *hookJob) *HookDelivery {
	cfg := f.hooks.config(j.appID)
	if cfg.url == "" {
		return nil
	}
	f.closeMu.RLock()
	closed := f.closed
	f.closeMu.RUnlock()
	if closed { // a closed forge sends nothing more
		return nil
	}
	f.hooks.mu.Lock()
	timeout := f.hooks.timeout
	f.hooks.mu.Unlock()
	if timeout <= 0 {
		timeout = HookTimeout
	}
	d := &HookDelivery{
		GUID: j.guid, AppID: j.appID, HookID: cfg.id, URL: cfg.url,
		Redelivery: j.redelivery, Event: j.event, Action: j.action,
		InstallationID: j.instID, RepositoryID: j.repoID, Payload: j.payload,
	}
	hdr := map[string]string{
		"Accept":                                 "*/*",
		"Content-Type":                           "application/json",
		"User-Agent":                             hookUserAgent,
		"X-GitHub-Delivery":                      j.guid,
		"X-GitHub-Event":                         j.event,
		"X-GitHub-Hook-ID":                       strconv.FormatInt(cfg.id, 10),
		"X-GitHub-Hook-Installation-Target-ID":   strconv.FormatInt(j.appID, 10),
		"X-GitHub-Hook-Installation-Target-Type": "integration",
	}
	if cfg.secret != "" {
		m256 := hmac.New(sha256.New, []byte(cfg.secret))
		m256.Write(j.payload)
		m1 := hmac.New(sha1.New, []byte(cfg.secret))
		m1.Write(j.payload)
		hdr["X-Hub-Signature-256"] = "sha256=" + hex.EncodeToString(m256.Sum(nil))
		hdr["X-Hub-Signature"] = "sha1=" + hex.EncodeToString(m1.Sum(nil))
	}
	d.RequestHeaders = hdr
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cfg.url, bytes.NewReader(j.payload))
	d.DeliveredAt = f.now().UTC()
	start := time.Now()
	if err == nil {
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		var resp *http.Response
		resp, err = hookClient.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, hookBodyCap))
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			d.StatusCode = resp.StatusCode
			d.ResponseBody = body
			d.ResponseHeaders = map[string]string{}
			for k, v := range resp.Header {
				d.ResponseHeaders[k] = strings.Join(v, ", ")
			}
			if d.OK() {
				d.Status = "OK"
			} else {
				d.Status = "Invalid HTTP Response: " + strconv.Itoa(resp.StatusCode)
			}
		}
	}
	d.Duration = time.Since(start)
	if err != nil {
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
			d.Status = "timed out"
		} else {
			d.Status = "failed to connect to host"
		}
		f.logf("forge: webhook delivery %s (%s) to %s: %v", j.guid, j.event, cfg.url, err)
	}
	return d
}

// hookClient sends deliveries: no redirects followed (a 3xx is a failed
// delivery, as on GitHub), its own connections, straight to the receiver
// (GitHub's Hookshot does not go through the test machine's proxy).
var hookClient = func() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.Proxy = nil
	return &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}()

// redeliver queues a recorded delivery again: same GUID and payload,
// marked as a redelivery, sent with the webhook's current URL and secret.
func (f *Forge) redeliver(d *HookDelivery) {
	f.hooks.mu.Lock()
	f.hooks.counts.Redelivered++
	f.hooks.mu.Unlock()
	f.enqueue(hookKey(d.RepositoryID, d.InstallationID), &hookJob{
		appID: d.AppID, instID: d.InstallationID, repoID: d.RepositoryID,
		event: d.Event, action: d.Action, guid: d.GUID, payload: d.Payload, redelivery: true,
	})
}

// hookKey orders deliveries: per repository, else per installation.
func hookKey(repoID, instID int64) string {
	if repoID != 0 {
		return "repo:" + strconv.FormatInt(repoID, 10)
	}
	return "installation:" + strconv.FormatInt(instID, 10)
}

// newGUID is a random (version 4) UUID, like X-GitHub-Delivery.
func newGUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// Emitting events.

// hookTarget is an installation whose App's webhook gets an event.
type hookTarget struct {
	app  *appState
	inst *installState
}

// repoTargets are the installations (one per App at most, since an App is
// installed once per account) that cover a repository, whose Apps have a
// webhook and which are not suspended.
func (f *Forge) repoTargets(vs ...repoView) []hookTarget {
	if f.hooks.active.Load() == 0 {
		return nil
	}
	seen := map[int64]bool{}
	var out []hookTarget
	for _, v := range vs {
		f.acct.mu.RLock()
		var ins []*installState
		for _, in := range f.acct.installs {
			if in.grants(v) {
				ins = append(ins, in)
			}
		}
		f.acct.mu.RUnlock()
		sort.Slice(ins, func(i, j int) bool { return ins[i].id < ins[j].id })
		for _, in := range ins {
			if seen[in.app.id] || f.hooks.config(in.app.id).url == "" || f.hooks.isSuspended(in.id) {
				continue
			}
			seen[in.app.id] = true
			out = append(out, hookTarget{app: in.app, inst: in})
		}
	}
	return out
}

// hookCall is an apiCall for building payloads outside a request: URLs
// point at the forge's own origin.
func (f *Forge) hookCall() *apiCall {
	host := strings.TrimPrefix(f.url, "http://")
	if host == "" {
		host = "forge.invalid"
	}
	return &apiCall{f: f, r: &http.Request{Host: host, URL: &url.URL{Path: "/"}, Header: http.Header{}}}
}

// emit queues one event per target; common is the payload without
// "installation", which each target adds.
func (f *Forge) emit(targets []hookTarget, key string, repoID int64, event, action string, common map[string]any) {
	for _, t := range targets {
		p := make(map[string]any, len(common)+1)
		for k, v := range common {
			p[k] = v
		}
		if _, full := p["installation"]; !full {
			p["installation"] = map[string]any{"id": t.inst.id, "node_id": nodeID("Installation", t.inst.id)}
		}
		body, err := json.Marshal(p)
		if err != nil {
			f.logf("forge: webhook payload: %v", err)
			continue
		}
		f.enqueue(key, &hookJob{appID: t.app.id, instID: t.inst.id, repoID: repoID,
			event: event, action: action, guid: newGUID(), payload: body})
	}
}

// senderOf is who the forge says made a change: the repository's or the
// installation's account (the Go API has no acting user).
func senderOf(c *apiCall, login string, id int64, typ string) userJSON {
	return ownerJSON(c, login, id, typ)
}

// withOrg adds "organization" for an organization's repository.
func withOrg(c *apiCall, p map[string]any, login string, id int64, typ string) {
	if typ == "Organization" {
		p["organization"] = orgJSONOf(c, &ownerState{id: id, login: login, typ: typ})
	}
}

// pushRepoJSON is the repository as a push event carries it: created_at
// and pushed_at are Unix seconds there (GitHub's own inconsistency, which
// go-github's Timestamp reads), plus a few legacy fields.
type pushRepoJSON struct {
	repoJSON
	CreatedAt    int64  `json:"created_at"`
	PushedAt     int64  `json:"pushed_at"`
	MasterBranch string `json:"master_branch"`
	Stargazers   int    `json:"stargazers"`
	Organization string `json:"organization,omitempty"`
}

type commitJSON struct {
	ID        string            `json:"id"`
	TreeID    string            `json:"tree_id"`
	Distinct  bool              `json:"distinct"`
	Message   string            `json:"message"`
	Timestamp string            `json:"timestamp"`
	URL       string            `json:"url"`
	Author    map[string]string `json:"author"`
	Committer map[string]string `json:"committer"`
	Added     []string          `json:"added"`
	Removed   []string          `json:"removed"`
	Modified  []string          `json:"modified"`
}

// commitInfo describes a commit for a push payload (nil if git cannot),
// with one git process: the fields, a \x01 marker, then the files changed
// (against the first parent; all of them for a root commit).
func (f *Forge) commitInfo(dir, sha, html string) *commitJSON {
	out, err := f.run(dir, nil, nil, "show", "--no-renames", "--diff-merges=first-parent", "-z", "--name-status",
		"--format=%T%x00%cI%x00%an%x00%ae%x00%cn%x00%ce%x00%B%x00%x01", sha)
	if err != nil {
		return nil
	}
	head, files, _ := strings.Cut(out, "\x00\x01\x00")
	parts := strings.SplitN(head, "\x00", 7)
	if len(parts) != 7 {
		return nil
	}
	cj := &commitJSON{ID: sha, TreeID: parts[0], Distinct: true, Timestamp: parts[1], Message: strings.TrimSpace(parts[6]),
		URL:       html + "/commit/" + sha,
		Author:    map[string]string{"name": parts[2], "email": parts[3]},
		Committer: map[string]string{"name": parts[4], "email": parts[5]},
		Added:     []string{}, Removed: []string{}, Modified: []string{}}
	fs := strings.Split(strings.Trim(files, "\x00\n"), "\x00")
	for i := 0; i+1 < len(fs); i += 2 {
		switch fs[i] {
		case "A":
			cj.Added = append(cj.Added, fs[i+1])
		case "D":
			cj.Removed = append(cj.Removed, fs[i+1])
		default:
			cj.Modified = append(cj.Modified, fs[i+1])
		}
	}
	return cj
}

// emitRefUpdate sends push for a ref that moved from before to after
// (zeroOID or "" for none), and create or delete when the ref appeared or
// went away. Called with the repository's opMu held, so a repository's
// pushes are queued in order.
func (f *Forge) emitRefUpdate(rs *repoState, ref, before, after string, forced bool) {
	if f.hooks.active.Load() == 0 {
		return
	}
	v, ok := f.reg.byID(rs.id)
	if !ok {
		return
	}
	targets := f.repoTargets(v)
	if len(targets) == 0 {
		return
	}
	if before == "" {
		before = zeroOID
	}
	if after == "" {
		after = zeroOID
	}
	created, deleted := before == zeroOID, after == zeroOID
	c := f.hookCall()
	rj := repoToJSON(c, v)
	prj := pushRepoJSON{repoJSON: rj, CreatedAt: v.CreatedAt.Unix(), PushedAt: v.PushedAt.Unix(), MasterBranch: v.DefaultBranch}
	if v.OwnerType == "Organization" {
		prj.Organization = v.Owner
	}
	sender := senderOf(c, v.Owner, v.OwnerID, v.OwnerType)
	commits := []*commitJSON{}
	var head *commitJSON
	if !deleted {
		head = f.commitInfo(f.gitDirOf(v.ID), after, rj.HTMLURL)
		if head != nil && strings.HasPrefix(ref, "refs/heads/") {
			commits = append(commits, head)
		}
	}
	compare := rj.HTMLURL + "/compare/" + before[:12] + "..." + after[:12]
	if created {
		compare = rj.HTMLURL + "/commit/" + after[:12]
	}
	push := map[string]any{
		"ref": ref, "before": before, "after": after,
		"created": created, "deleted": deleted, "forced": forced,
		"base_ref": nil, "compare": compare, "commits": commits, "head_commit": head,
		"repository": prj, "pusher": map[string]any{"name": v.Owner, "email": nil},
		"sender": sender,
	}
	withOrg(c, push, v.Owner, v.OwnerID, v.OwnerType)
	key := hookKey(v.ID, 0)
	f.emit(targets, key, v.ID, "push", "", push)

	short, refType := strings.TrimPrefix(ref, "refs/heads/"), "branch"
	if strings.HasPrefix(ref, "refs/tags/") {
		short, refType = strings.TrimPrefix(ref, "refs/tags/"), "tag"
	}
	switch {
	case created:
		p := map[string]any{"ref": short, "ref_type": refType, "master_branch": v.DefaultBranch,
			"description": nil, "pusher_type": "user", "repository": rj, "sender": sender}
		withOrg(c, p, v.Owner, v.OwnerID, v.OwnerType)
		f.emit(targets, key, v.ID, "create", "", p)
	case deleted:
		p := map[string]any{"ref": short, "ref_type": refType, "pusher_type": "user", "repository": rj, "sender": sender}
		withOrg(c, p, v.Owner, v.OwnerID, v.OwnerType)
		f.emit(targets, key, v.ID, "delete", "", p)
	}
}

// hookRefs snapshots a repository's branches and tags (rs.opMu held) and
// returns what sends push, create and delete for each ref that changed
// since, in ref name order (for Import, whose stream decides the refs).
func (f *Forge) hookRefs(rs *repoState) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	refs := func() map[string]string {
		out, err := f.run(f.gitDirOf(rs.id), nil, nil, "for-each-ref", "--format=%(refname) %(objectname)", "refs/heads", "refs/tags")
		m := map[string]string{}
		if err != nil {
			return m
		}
		for _, line := range strings.Split(out, "\n") {
			if ref, oid, ok := strings.Cut(line, " "); ok {
				m[ref] = oid
			}
		}
		return m
	}
	before := refs()
	return func() {
		after := refs()
		var names []string
		for ref := range before {
			if after[ref] != before[ref] {
				names = append(names, ref)
			}
		}
		for ref := range after {
			if _, had := before[ref]; !had {
				names = append(names, ref)
			}
		}
		sort.Strings(names)
		for _, ref := range names {
			// fast-import refuses non-fast-forward updates: never forced.
			f.emitRefUpdate(rs, ref, before[ref], after[ref], false)
		}
	}
}

// hookRepoEdit snapshots a repository before a change and returns what
// sends the repository events the change made once it is done: deleted,
// renamed, transferred, privatized or publicized, archived or
// unarchived, edited (default branch). Use as
// `defer f.hookRepoEdit(owner, name)()` first thing in a mutation, so it
// runs after the mutation released its locks.
func (f *Forge) hookRepoEdit(owner, name string) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	before, ok := f.Lookup(owner, name)
	if !ok {
		return func() {}
	}
	bv, ok := f.reg.byID(before.ID)
	if !ok {
		return func() {}
	}
	return func() {
		av, live := f.reg.byID(bv.ID)
		c := f.hookCall()
		send := func(v repoView, action string, changes map[string]any, also ...repoView) {
			targets := f.repoTargets(append([]repoView{v}, also...)...)
			if len(targets) == 0 {
				return
			}
			p := map[string]any{"action": action, "repository": repoToJSON(c, v),
				"sender": senderOf(c, v.Owner, v.OwnerID, v.OwnerType)}
			if changes != nil {
				p["changes"] = changes
			}
			withOrg(c, p, v.Owner, v.OwnerID, v.OwnerType)
			f.emit(targets, hookKey(v.ID, 0), v.ID, "repository", action, p)
		}
		if !live {
			send(bv, "deleted", nil)
			return
		}
		if !strings.EqualFold(av.Owner, bv.Owner) {
			from := "user"
			if bv.OwnerType == "Organization" {
				from = "organization"
			}
			// The new account's installation if any, else the old one's
			// (which just lost the repository).
			send(av, "transferred", map[string]any{"owner": map[string]any{"from": map[string]any{
				from: ownerJSON(c, bv.Owner, bv.OwnerID, bv.OwnerType)}}}, bv)
		} else if av.Name != bv.Name {
			send(av, "renamed", map[string]any{"repository": map[string]any{"name": map[string]any{"from": bv.Name}}})
		}
		if av.Private != bv.Private {
			if av.Private {
				send(av, "privatized", nil)
			} else {
				send(av, "publicized", nil)
			}
		}
		if av.Archived != bv.Archived {
			if av.Archived {
				send(av, "archived", nil)
			} else {
				send(av, "unarchived", nil)
			}
		}
		if av.DefaultBranch != bv.DefaultBranch {
			send(av, "edited", map[string]any{"default_branch": map[string]any{"from": bv.DefaultBranch}})
		}
	}
}

// hookRepoCreated returns what sends "repository created" for a
// repository CreateRepo made (to installations that cover it: those of
// every repository of the account); use as
// `defer f.hookRepoCreated(owner, name)()`.
func (f *Forge) hookRepoCreated(owner, name string) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	if _, exists := f.Lookup(owner, name); exists {
		return func() {} // CreateRepo will refuse
	}
	return func() {
		r, ok := f.Lookup(owner, name)
		if !ok {
			return
		}
		v, ok := f.reg.byID(r.ID)
		if !ok {
			return
		}
		targets := f.repoTargets(v)
		if len(targets) == 0 {
			return
		}
		c := f.hookCall()
		p := map[string]any{"action": "created", "repository": repoToJSON(c, v),
			"sender": senderOf(c, v.Owner, v.OwnerID, v.OwnerType)}
		withOrg(c, p, v.Owner, v.OwnerID, v.OwnerType)
		f.emit(targets, hookKey(v.ID, 0), v.ID, "repository", "created", p)
	}
}

// grantedRepos lists the repositories an installation covers, by id.
func (f *Forge) grantedRepos(in *installState) []repoView {
	f.reg.mu.RLock()
	all := make([]repoView, 0, len(f.reg.repos))
	for _, rs := range f.reg.repos {
		all = append(all, rs.view())
	}
	f.reg.mu.RUnlock()
	f.acct.mu.RLock()
	out := all[:0]
	for _, v := range all {
		if in.grants(v) {
			out = append(out, v)
		}
	}
	f.acct.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// shortRepos is the short repository list installation events carry.
func shortRepos(vs []repoView) []map[string]any {
	out := make([]map[string]any, 0, len(vs))
	for _, v := range vs {
		out = append(out, map[string]any{"id": v.ID, "node_id": nodeID("Repository", v.ID), "name": v.Name,
			"full_name": v.Owner + "/" + v.Name, "private": v.Private})
	}
	return out
}

// installationPayload is the full installation object of installation
// events (with suspended_at/suspended_by when suspended).
func (f *Forge) installationPayload(c *apiCall, in *installState) map[string]any {
	b, _ := json.Marshal(installationToJSON(c, in))
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	f.hooks.mu.Lock()
	at, susp := f.hooks.suspended[in.id]
	f.hooks.mu.Unlock()
	m["suspended_at"], m["suspended_by"] = nil, nil
	if susp {
		m["suspended_at"] = ghTime(at)
		m["suspended_by"] = senderOf(c, in.account.login, in.account.id, in.account.typ)
	}
	return m
}

// emitInstallation sends an installation event (created, deleted,
// suspend, unsuspend) to the App, suspended or not.
func (f *Forge) emitInstallation(in *installState, action string, repos []repoView) {
	if f.hooks.config(in.app.id).url == "" {
		return
	}
	c := f.hookCall()
	p := map[string]any{"action": action, "installation": f.installationPayload(c, in),
		"repositories": shortRepos(repos), "requester": nil,
		"sender": senderOf(c, in.account.login, in.account.id, in.account.typ)}
	f.emit([]hookTarget{{app: in.app, inst: in}}, hookKey(0, in.id), 0, "installation", action, p)
}

// hookInstalled returns what sends "installation created" for an App
// newly installed on an account; use as
// `defer f.hookInstalled(appID, account)()`.
func (f *Forge) hookInstalled(appID int64, account string) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	find := func() *installState {
		f.acct.mu.RLock()
		defer f.acct.mu.RUnlock()
		for _, i := range f.acct.installs {
			if i.app.id == appID && strings.EqualFold(i.account.login, account) {
				return i
			}
		}
		return nil
	}
	if find() != nil {
		return func() {} // InstallApp will refuse
	}
	return func() {
		if in := find(); in != nil {
			f.emitInstallation(in, "created", f.grantedRepos(in))
		}
	}
}

// hookUninstall returns what sends "installation deleted" once an
// installation is gone; use as `defer f.hookUninstall(id)()`.
func (f *Forge) hookUninstall(installationID int64) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	f.acct.mu.RLock()
	in := f.acct.installs[installationID]
	f.acct.mu.RUnlock()
	if in == nil {
		return func() {}
	}
	repos := f.grantedRepos(in)
	return func() {
		f.acct.mu.RLock()
		gone := f.acct.installs[installationID] == nil
		f.acct.mu.RUnlock()
		if gone {
			f.emitInstallation(in, "deleted", repos)
		}
	}
}

// hookSelection returns what sends installation_repositories added and
// removed for a change of an installation's selection; use as
// `defer f.hookSelection(id)()`.
func (f *Forge) hookSelection(installationID int64) func() {
	if f.hooks.active.Load() == 0 {
		return func() {}
	}
	f.acct.mu.RLock()
	in := f.acct.installs[installationID]
	f.acct.mu.RUnlock()
	if in == nil {
		return func() {}
	}
	before := f.grantedRepos(in)
	return func() {
		after := f.grantedRepos(in)
		had, has := map[int64]bool{}, map[int64]bool{}
		for _, v := range before {
			had[v.ID] = true
		}
		for _, v := range after {
			has[v.ID] = true
		}
		var added, removed []repoView
		for _, v := range after {
			if !had[v.ID] {
				added = append(added, v)
			}
		}
		for _, v := range before {
			if !has[v.ID] {
				removed = append(removed, v)
			}
		}
		if f.hooks.config(in.app.id).url == "" || f.hooks.isSuspended(in.id) {
			return
		}
		c := f.hookCall()
		f.acct.mu.RLock()
		sel := "all"
		if in.repos != nil {
			sel = "selected"
		}
		f.acct.mu.RUnlock()
		for _, ch := range []struct {
			action string
			vs     []repoView
		}{{"added", added}, {"removed", removed}} {
			if len(ch.vs) == 0 {
				continue
			}
			p := map[string]any{"action": ch.action, "installation": f.installationPayload(c, in),
				"repository_selection": sel, "repositories_added": shortRepos(nil), "repositories_removed": shortRepos(nil),
				"requester": nil, "sender": senderOf(c, in.account.login, in.account.id, in.account.typ)}
			p["repositories_"+ch.action] = shortRepos(ch.vs)
			f.emit([]hookTarget{{app: in.app, inst: in}}, hookKey(0, in.id), 0, "installation_repositories", ch.action, p)
		}
	}
}
