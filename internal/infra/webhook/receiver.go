package webhook

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/metrics"
)

// MaxBody is the largest delivery read: GitHub caps a payload at 25 MB.
const MaxBody = 25 << 20

// DefaultTimeout bounds one delivery's hand-off: GitHub gives up on an
// answer after 10 s and records the delivery as failed.
const DefaultTimeout = 8 * time.Second

// A Delivery is what a hand-off carries of the delivery that asked for it.
type Delivery struct {
	GUID   string // X-GitHub-Delivery
	Event  string // X-GitHub-Event
	Action string // the payload's action, if any
	After  string // the pushed commit, for a push
}

// Dispatcher hands work to Temporal durably.
type Dispatcher interface {
	// Collect makes sure repo is collected after the delivery: once it
	// returns nil, a collection that starts after the delivery runs
	// (signalled to one in flight, which collects once more, or started).
	Collect(ctx context.Context, repo repoid.ID, d Delivery) error
	// Recollect makes sure every repository gitfleet collects of an
	// account is collected after the delivery, as Collect does for one.
	Recollect(ctx context.Context, account string, d Delivery) error
}

// Store is what the receiver reads and records.
type Store interface {
	// Collected reports whether a repository of the host, by its id, is
	// one gitfleet collects.
	Collected(ctx context.Context, host, externalID string) (bool, error)
	// AccountCollected reports whether gitfleet collects any repository
	// of an account of the host.
	AccountCollected(ctx context.Context, host, account string) (bool, error)
	DeliveryHandled(ctx context.Context, guid string) (bool, error)
	RecordDelivery(ctx context.Context, guid, event string) error
	// NoteEvents records that a delivery named these repositories (by
	// id): the sweep checks them less often while events come.
	NoteEvents(ctx context.Context, host string, externalIDs []string) error
}

// Receiver is the HTTP handler the App's webhook URL points at.
type Receiver struct {
	Secret     []byte
	Host       string // the repositories' host, as repoid names it
	Store      Store
	Dispatcher Dispatcher
	Log        *zap.Logger
	// Timeout bounds a delivery's hand-off (0: DefaultTimeout).
	Timeout time.Duration
}

// Deliveries counts deliveries by event (the ones gitfleet reads, else
// "other") and outcome.
var Deliveries = metrics.NewCounter("gitfleet_webhook_deliveries_total",
	"Webhook deliveries received, by event and outcome (accepted, duplicate, not-collected, ignored, refused, failed).",
	"event", "outcome")

// Outcomes of a delivery.
const (
	OutcomeAccepted     = "accepted"      // handed to Temporal
	OutcomeDuplicate    = "duplicate"     // a redelivery of one handed over already
	OutcomeNotCollected = "not-collected" // about repositories gitfleet does not collect
	OutcomeIgnored      = "ignored"       // an event or action gitfleet does not act on
	OutcomeRefused      = "refused"       // not GitHub's (signature), or malformed
	OutcomeFailed       = "failed"        // not handed over: GitHub records a failure, redelivery recovers it
)

// events are the events gitfleet reads.
var events = map[string]bool{"push": true, "create": true, "delete": true, "repository": true,
	"installation_repositories": true, "installation": true, "ping": true}

func (rc *Receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	event := r.Header.Get("X-GitHub-Event")
	label := event
	if !events[label] {
		label = "other"
	}
	answer := func(status int, outcome, msg string) {
		Deliveries.Inc(label, outcome)
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		fmt.Fprintln(w, msg)
	}
	if r.Method != http.MethodPost {
		answer(http.StatusMethodNotAllowed, OutcomeRefused, "POST a delivery")
		return
	}
	// The signature is checked before anything the body says is read.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		answer(http.StatusRequestEntityTooLarge, OutcomeRefused, "a delivery is at most 25 MB")
		return
	case err != nil:
		answer(http.StatusBadRequest, OutcomeRefused, "the body could not be read")
		return
	case !Valid(rc.Secret, body, r.Header.Get("X-Hub-Signature-256")):
		answer(http.StatusUnauthorized, OutcomeRefused, "X-Hub-Signature-256 does not match the webhook secret")
		return
	}
	d := Delivery{GUID: r.Header.Get("X-GitHub-Delivery"), Event: event}
	if d.GUID == "" || len(d.GUID) > 64 || event == "" {
		answer(http.StatusBadRequest, OutcomeRefused, "X-GitHub-Delivery and X-GitHub-Event are required")
		return
	}
	if !events[event] {
		answer(http.StatusAccepted, OutcomeIgnored, "event not used")
		return
	}
	if event == "ping" {
		answer(http.StatusOK, OutcomeIgnored, "pong")
		return
	}
	job, err := rc.parse(body, &d)
	if err != nil {
		answer(http.StatusBadRequest, OutcomeRefused, err.Error())
		return
	}
	if len(job.repos) == 0 && job.account == "" {
		answer(http.StatusAccepted, OutcomeIgnored, "nothing to collect")
		return
	}

	timeout := rc.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), timeout)
	defer cancel()
	outcome, err := rc.handOff(ctx, d, job)
	switch {
	case err != nil:
		rc.Log.Warn("Webhook delivery not handed over: GitHub records it failed, and redelivery recovers it",
			zap.String("delivery", d.GUID), zap.String("event", event), zap.Error(err))
		answer(http.StatusServiceUnavailable, OutcomeFailed, "not handed over; redeliver it")
	case outcome == OutcomeDuplicate:
		answer(http.StatusOK, outcome, "already handled")
	case outcome == OutcomeNotCollected:
		answer(http.StatusAccepted, outcome, "not a collected repository")
	default:
		rc.Log.Info("Webhook delivery handed over", zap.String("delivery", d.GUID), zap.String("event", event),
			zap.String("action", d.Action), zap.Int("repositories", len(job.repos)), zap.String("account", job.account))
		answer(http.StatusAccepted, outcome, "collecting")
	}
}

// handOff collects every collected repository of a delivery (or of its
// account), unless the delivery was handed over before, and records it
// once every collection is with Temporal: a delivery whose hand-off failed
// part way is not recorded, and its redelivery collects them all again (a
// collection more costs little; a lost one, a secret found late).
func (rc *Receiver) handOff(ctx context.Context, d Delivery, job work) (string, error) {
	done, err := rc.Store.DeliveryHandled(ctx, d.GUID)
	if err != nil || done {
		return OutcomeDuplicate, err
	}
	if job.account != "" {
		return rc.handAccount(ctx, d, job.account)
	}
	var handed []string
	for _, r := range job.repos {
		ok, err := rc.Store.Collected(ctx, rc.Host, r.externalID)
		if err != nil {
			return "", err
		}
		if !ok {
			continue
		}
		if err := rc.Dispatcher.Collect(ctx, r.id, d); err != nil {
			return "", err
		}
		handed = append(handed, r.externalID)
	}
	if len(handed) == 0 {
		return OutcomeNotCollected, nil
	}
	// Handed over all the same if these fail: a redelivery collects once
	// more, and the sweep checks at its usual pace.
	if err := rc.Store.RecordDelivery(ctx, d.GUID, d.Event); err != nil {
		rc.Log.Warn("Webhook delivery handed over but not recorded", zap.String("delivery", d.GUID), zap.Error(err))
	}
	if err := rc.Store.NoteEvents(ctx, rc.Host, handed); err != nil {
		rc.Log.Warn("Webhook delivery's repositories not noted", zap.String("delivery", d.GUID), zap.Error(err))
	}
	return OutcomeAccepted, nil
}

// handAccount hands a delivery about a whole account to its re-collection.
func (rc *Receiver) handAccount(ctx context.Context, d Delivery, account string) (string, error) {
	ok, err := rc.Store.AccountCollected(ctx, rc.Host, account)
	if err != nil {
		return "", err
	}
	if !ok {
		return OutcomeNotCollected, nil
	}
	if err := rc.Dispatcher.Recollect(ctx, account, d); err != nil {
		return "", err
	}
	if err := rc.Store.RecordDelivery(ctx, d.GUID, d.Event); err != nil {
		rc.Log.Warn("Webhook delivery handed over but not recorded", zap.String("delivery", d.GUID), zap.Error(err))
	}
	return OutcomeAccepted, nil
}

// Valid reports whether signature (X-Hub-Signature-256: "sha256=" and the
// hex HMAC-SHA256 of body under secret) is body's, in constant time.
func Valid(secret, body []byte, signature string) bool {
	hexSum, ok := strings.CutPrefix(signature, "sha256=")
	if !ok || len(secret) == 0 {
		return false
	}
	got, err := hex.DecodeString(hexSum)
	if err != nil {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

// Sign is the X-Hub-Signature-256 of body under secret.
func Sign(secret, body []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// repo is a repository a delivery names: its id and its name now.
type repo struct {
	externalID string
	id         repoid.ID
}

// work is what a delivery asks: these repositories collected, or every
// repository of an account.
type work struct {
	repos   []repo
	account string
}

// payload holds the fields gitfleet reads of the events it acts on.
type payload struct {
	Action       string       `json:"action"`
	After        string       `json:"after"`
	Repository   *repository  `json:"repository"`
	Added        []repository `json:"repositories_added"`
	Removed      []repository `json:"repositories_removed"`
	Installation *struct {
		Account struct {
			Login string `json:"login"`
		} `json:"account"`
	} `json:"installation"`
}

type repository struct {
	ID       int64  `json:"id"`
	FullName string `json:"full_name"`
}

// actions are the repository actions that change what a collection finds:
// its name, owner, existence or visibility.
var actions = map[string]bool{"renamed": true, "transferred": true, "deleted": true, "privatized": true,
	"publicized": true, "archived": true, "unarchived": true}

// installationActions are the installation actions that change what the
// App can read of every repository of its account.
var installationActions = map[string]bool{"created": true, "deleted": true, "suspend": true, "unsuspend": true}

// MaxNamed is the most repositories a delivery hands over one by one, in
// one request each; a selection that changes more is handed to the
// account's re-collection in one request, within GitHub's 10 s.
const MaxNamed = 20

// parse reads what a delivery asks to collect, by event.
func (rc *Receiver) parse(body []byte, d *Delivery) (work, error) {
	var p payload
	if err := json.Unmarshal(body, &p); err != nil {
		return work{}, fmt.Errorf("the payload is not an event: %s", textsafe.Printable(err.Error()))
	}
	d.Action = p.Action
	var named []repository
	switch d.Event {
	case "push", "create", "delete":
		if p.Repository != nil {
			named, d.After = []repository{*p.Repository}, p.After
		}
	case "repository":
		if p.Repository != nil && actions[p.Action] {
			named = []repository{*p.Repository}
		}
	case "installation_repositories":
		named = append(p.Added, p.Removed...)
		if len(named) > MaxNamed {
			return rc.account(p)
		}
	case "installation":
		if installationActions[p.Action] {
			return rc.account(p)
		}
	}
	var out work
	for _, r := range named {
		id, err := repoid.Parse(r.FullName, rc.Host)
		if err != nil || r.ID <= 0 || id.Host != rc.Host {
			return work{}, fmt.Errorf("repository %q (id %d) is not a repository of %s", textsafe.Printable(r.FullName), r.ID, rc.Host)
		}
		out.repos = append(out.repos, repo{externalID: fmt.Sprint(r.ID), id: id})
	}
	return out, nil
}

// account reads the account an installation event is about.
func (rc *Receiver) account(p payload) (work, error) {
	if p.Installation == nil {
		return work{}, errors.New("the event names no installation")
	}
	login := p.Installation.Account.Login
	if err := repoid.ValidOwner(login); err != nil {
		return work{}, fmt.Errorf("installation account %q: %w", textsafe.Printable(login), err)
	}
	return work{account: login}, nil
}
