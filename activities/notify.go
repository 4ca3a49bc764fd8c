package activities

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.uber.org/zap"

	"gitfleet/internal/domain/notify"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// Notifications are the alerts' activities (architecture §8, "Alerts").
// The receivers' URLs live here, read from the worker's configuration:
// the workflow names a receiver by its digest, and no error, log line or
// metric carries a URL.
type Notifications struct {
	Store *store.Store
	// Targets are GITFLEET_NOTIFY_URL's receivers; none sends nothing.
	Targets []notify.Target
	// PerMinute bounds the messages to one receiver in a minute, across
	// the fleet (0: notify.DefaultPerMinute).
	PerMinute int
	// Client sends the messages (nil: one with a 10 s timeout that
	// follows no redirect).
	Client *http.Client
	Log    *zap.Logger
}

func (n *Notifications) logger() *zap.Logger {
	if n.Log == nil {
		return zap.NewNop()
	}
	return n.Log
}

// PrepareNotifications writes one message per receiver announcing the
// shard's secrets of the kind that no message announced to it before:
// each secret is claimed in the transaction that writes its message
// (store.ClaimNotification). A retry finds the messages of its first
// attempt (their ids are the prefix's and the receiver's).
func (n *Notifications) PrepareNotifications(ctx context.Context, in workflows.PrepareNotificationsInput) ([]workflows.PreparedMessage, error) {
	if len(n.Targets) == 0 {
		return nil, nil
	}
	kind := notify.Kind(in.Kind)
	cands, err := n.Store.AlertCandidates(ctx, in.ShardID, kind, in.Since)
	if err != nil {
		return nil, AppError(err)
	}
	if len(cands) == 0 {
		return nil, nil
	}
	alerts := make([]notify.Alert, len(cands))
	fps := make([]string, len(cands))
	for i, x := range cands {
		alerts[i] = alertOf(x)
		fps[i] = alerts[i].Fingerprint
	}
	repo := cands[0].Repository
	var link string
	if strings.HasPrefix(cands[0].Subject, "codebase:") {
		link = "https://" + repo
	}
	var out []workflows.PreparedMessage
	for _, t := range n.Targets {
		id := in.MessagePrefix + ":" + t.Digest()
		m, err := n.Store.ClaimNotification(ctx, id, t.Digest(), kind, in.ShardID, fps, func(won map[string]bool) ([]byte, int, error) {
			var mine []notify.Alert
			for _, a := range alerts {
				if won[a.Fingerprint] {
					mine = append(mine, a)
					delete(won, a.Fingerprint) // one alert per secret, found at several paths or not
				}
			}
			msg, _ := notify.Build(id, kind, repo, link, mine)
			body, err := msg.Body(t.Format)
			return body, len(mine), err
		})
		if err != nil {
			return nil, AppError(err)
		}
		if m == nil || m.State != store.MessagePending {
			continue
		}
		out = append(out, workflows.PreparedMessage{ID: m.ID, Receiver: m.URLDigest, Alerts: m.Alerts})
	}
	return out, nil
}

// alertOf is a secret as an alert shows it: where it was first found,
// its redacted preview, its last check.
func alertOf(x store.FleetSecret) notify.Alert {
	path := x.Path
	if x.Archive != "" {
		path += "!" + x.Archive
	}
	validity := "unchecked"
	if x.Validity != nil {
		validity = x.Validity.State
	}
	line := x.Line
	if x.Archive != "" {
		line = 0
	}
	return notify.Alert{Rule: x.RuleID, Path: textsafe.Printable(path), Line: line, Commit: x.Commit, Preview: textsafe.Printable(x.Preview),
		Validity: validity, Link: notify.BlobLink(x.Repository, strings.HasPrefix(x.Subject, "codebase:"), x.Commit, x.Path, line),
		Fingerprint: notify.Fingerprint(x.RuleID, x.SecretHash, x.Subject, x.File)}
}

// SendNotification POSTs a message to its receiver, once the fleet-wide
// rate bound gives it a slot: a 2xx sends it; a 429, a 5xx or no answer
// is Retryable (the workflow's backoff; a Retry-After is honoured); any
// other answer is Permanent, and the message's secrets are released. A
// message sent before (a retry after a lost answer of the database)
// is not sent again.
func (n *Notifications) SendNotification(ctx context.Context, in workflows.SendNotificationInput) error {
	m, err := n.Store.NotificationMessage(ctx, in.ID)
	if err != nil {
		return AppError(err)
	}
	switch {
	case m == nil:
		return permanent(fmt.Sprintf("message %s does not exist", in.ID), errclass.ReasonNotFound)
	case m.State == store.MessageSent:
		return nil
	case m.State == store.MessageRefused:
		return permanent(fmt.Sprintf("message %s was refused by its receiver", in.ID), "refused")
	}
	var target *notify.Target
	for i := range n.Targets {
		if n.Targets[i].Digest() == m.URLDigest {
			target = &n.Targets[i]
		}
	}
	if target == nil {
		// The receiver left GITFLEET_NOTIFY_URL since: its secrets are
		// released for the receivers configured now.
		if err := n.Store.MessageAttempted(ctx, m.ID, store.MessageRefused); err != nil {
			return AppError(err)
		}
		return permanent(fmt.Sprintf("receiver %s is no longer configured", m.URLDigest), errclass.ReasonInvalidInput)
	}
	perMinute := n.PerMinute
	if perMinute <= 0 {
		perMinute = notify.DefaultPerMinute
	}
	wait, err := n.Store.ReserveSend(ctx, m.URLDigest, perMinute)
	if err != nil {
		return AppError(err)
	}
	if wait > 0 {
		return retryable(fmt.Sprintf("receiver %s: %d messages a minute sent; waiting", m.URLDigest, perMinute), "rate-limited", wait)
	}
	status, retryAfter, err := n.post(ctx, *target, m)
	log := n.logger().With(zap.String("message", m.ID), zap.String("receiver", m.URLDigest), zap.Int64("shard", m.ShardID),
		zap.Int("alerts", m.Alerts), zap.Int("attempt", m.Attempts+1))
	if err != nil {
		if aerr := n.Store.MessageAttempted(ctx, m.ID, store.MessagePending); aerr != nil {
			return AppError(aerr)
		}
		log.Warn("alert not delivered: no answer", zap.String("error", err.Error()))
		return retryable(fmt.Sprintf("receiver %s: %s", m.URLDigest, err), "unavailable", 0)
	}
	switch notify.Classify(status) {
	case notify.Delivered:
		if err := n.Store.MessageAttempted(ctx, m.ID, store.MessageSent); err != nil {
			return AppError(err)
		}
		log.Info("alert sent", zap.Int("status", status))
		return nil
	case notify.Retry:
		if err := n.Store.MessageAttempted(ctx, m.ID, store.MessagePending); err != nil {
			return AppError(err)
		}
		log.Warn("alert not delivered: the receiver asks again later", zap.Int("status", status))
		return retryable(fmt.Sprintf("receiver %s answered %d", m.URLDigest, status), "server-error", retryAfter)
	default:
		if err := n.Store.MessageAttempted(ctx, m.ID, store.MessageRefused); err != nil {
			return AppError(err)
		}
		log.Error("alert refused by its receiver: its secrets are released", zap.Int("status", status))
		return permanent(fmt.Sprintf("receiver %s refused the message: %d", m.URLDigest, status), "refused")
	}
}

// post sends the message; its error never holds the URL (net/http's
// name it): only what failed (dial, read) and why.
func (n *Notifications) post(ctx context.Context, t notify.Target, m *store.NotificationMessage) (int, time.Duration, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(m.Body))
	if err != nil {
		return 0, 0, errors.New("the request could not be made")
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "gitfleet")
	req.Header.Set("X-Gitfleet-Delivery", m.ID)
	c := n.Client
	if c == nil {
		c = defaultNotifyClient
	}
	resp, err := c.Do(req)
	if err != nil {
		var op *net.OpError
		switch {
		case errors.As(err, &op):
			return 0, 0, fmt.Errorf("%s: %v", op.Op, op.Err)
		case ctx.Err() != nil:
			return 0, 0, ctx.Err()
		default:
			return 0, 0, errors.New("no answer")
		}
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	var after time.Duration
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
		after = min(time.Duration(s)*time.Second, time.Hour)
	}
	return resp.StatusCode, after, nil
}

var defaultNotifyClient = &http.Client{
	Timeout:       10 * time.Second,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

func retryable(msg, reason string, after time.Duration) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(errclass.Retryable), temporal.ApplicationErrorOptions{
		NextRetryDelay: after, Details: []any{reason}})
}

func permanent(msg, reason string) error {
	return temporal.NewApplicationErrorWithOptions(msg, string(errclass.Permanent), temporal.ApplicationErrorOptions{
		NonRetryable: true, Details: []any{reason}})
}
