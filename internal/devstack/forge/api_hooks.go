package forge

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
)

// The App webhook endpoints, authenticated with the App's JWT like the
// other App endpoints: the webhook's configuration and its deliveries of
// the last three days (HookRetention, by the forge's clock), newest first
// with cursor pagination, one delivery with its request and response, and
// redelivery.

const docAppHooks = "https://docs.github.com/rest/apps/webhooks"

// refuseSuspended answers 403 to a token request for a suspended
// installation, as GitHub does, before handing over to h.
func refuseSuspended(h func(*apiCall)) func(*apiCall) {
	return func(c *apiCall) {
		id, _ := strconv.ParseInt(c.param("id"), 10, 64)
		if c.who.app != nil && c.f.hooks.isSuspended(id) {
			c.f.acct.mu.RLock()
			in := c.f.acct.installs[id]
			c.f.acct.mu.RUnlock()
			if in != nil && in.app == c.who.app {
				c.error(http.StatusForbidden, "This installation has been suspended", docApps)
				return
			}
		}
		h(c)
	}
}

// GET /app/hook/config
func getAppHookConfig(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	writeHookConfig(c, a)
}

// PATCH /app/hook/config: url, secret (content_type and insecure_ssl are
// accepted and ignored: deliveries are JSON, over plain or verified TLS).
func patchAppHookConfig(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	var req struct {
		URL    *string `json:"url"`
		Secret *string `json:"secret"`
	}
	body, _ := io.ReadAll(io.LimitReader(c.r.Body, 1<<20))
	if err := json.Unmarshal(body, &req); err != nil {
		c.error(http.StatusBadRequest, "Problems parsing JSON", docAppHooks)
		return
	}
	cfg := c.f.hooks.config(a.id)
	if req.URL != nil {
		cfg.url = *req.URL
	}
	if req.Secret != nil {
		cfg.secret = *req.Secret
	}
	if err := c.f.SetAppWebhook(a.id, cfg.url, cfg.secret); err != nil {
		c.error(http.StatusUnprocessableEntity, "Validation Failed", docAppHooks)
		return
	}
	writeHookConfig(c, a)
}

func writeHookConfig(c *apiCall, a *appState) {
	cfg := c.f.hooks.config(a.id)
	secret := ""
	if cfg.secret != "" {
		secret = "********"
	}
	c.json(http.StatusOK, map[string]any{"content_type": "json", "insecure_ssl": "0", "url": cfg.url, "secret": secret})
}

type hookMessageJSON struct {
	Headers map[string]string `json:"headers"`
	Payload json.RawMessage   `json:"payload"`
}

type deliveryJSON struct {
	ID             int64            `json:"id"`
	GUID           string           `json:"guid"`
	DeliveredAt    string           `json:"delivered_at"`
	Redelivery     bool             `json:"redelivery"`
	Duration       float64          `json:"duration"`
	Status         string           `json:"status"`
	StatusCode     int              `json:"status_code"`
	Event          string           `json:"event"`
	Action         *string          `json:"action"`
	InstallationID *int64           `json:"installation_id"`
	RepositoryID   *int64           `json:"repository_id"`
	ThrottledAt    *string          `json:"throttled_at"`
	URL            string           `json:"url,omitempty"`
	Request        *hookMessageJSON `json:"request,omitempty"`
	Response       *hookMessageJSON `json:"response,omitempty"`
}

func deliveryToJSON(d *HookDelivery, full bool) deliveryJSON {
	j := deliveryJSON{ID: d.ID, GUID: d.GUID, DeliveredAt: ghTime(d.DeliveredAt), Redelivery: d.Redelivery,
		Duration: d.Duration.Seconds(), Status: d.Status, StatusCode: d.StatusCode, Event: d.Event}
	if d.Action != "" {
		j.Action = &d.Action
	}
	if d.InstallationID != 0 {
		j.InstallationID = &d.InstallationID
	}
	if d.RepositoryID != 0 {
		j.RepositoryID = &d.RepositoryID
	}
	if full {
		j.URL = d.URL
		j.Request = &hookMessageJSON{Headers: d.RequestHeaders, Payload: json.RawMessage(d.Payload)}
		body, _ := json.Marshal(string(d.ResponseBody))
		hdr := d.ResponseHeaders
		if hdr == nil {
			hdr = map[string]string{}
		}
		j.Response = &hookMessageJSON{Headers: hdr, Payload: body}
	}
	return j
}

// retained lists the App's deliveries still within the retention window,
// newest first.
func (c *apiCall) retained(appID int64) []*HookDelivery {
	cutoff := c.f.now().Add(-HookRetention)
	h := &c.f.hooks
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []*HookDelivery
	for i := len(h.done) - 1; i >= 0; i-- {
		d := h.done[i]
		if d.AppID == appID && !d.DeliveredAt.Before(cutoff) {
			out = append(out, d)
		}
	}
	return out
}

// GET /app/hook/deliveries: per_page (default 30, at most 100), cursor
// (from the Link header's next, "v1_<id>"), status=success|failure.
func getAppHookDeliveries(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	q := c.r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	per = min(per, 100)
	var below int64 // only ids below it; 0 for none
	if cur := q.Get("cursor"); cur != "" {
		n, err := strconv.ParseInt(strings.TrimPrefix(cur, "v1_"), 10, 64)
		if err != nil || !strings.HasPrefix(cur, "v1_") || n <= 0 {
			c.error(http.StatusUnprocessableEntity, "Invalid cursor", docAppHooks)
			return
		}
		below = n
	}
	status := q.Get("status")
	if status != "" && status != "success" && status != "failure" {
		c.error(http.StatusUnprocessableEntity, "Invalid status", docAppHooks)
		return
	}
	items := []deliveryJSON{}
	more := false
	for _, d := range c.retained(a.id) {
		if below != 0 && d.ID >= below {
			continue
		}
		if (status == "success" && !d.OK()) || (status == "failure" && d.OK()) {
			continue
		}
		if len(items) == per {
			more = true
			break
		}
		items = append(items, deliveryToJSON(d, false))
	}
	if more {
		u := *c.r.URL
		v := u.Query()
		v.Set("cursor", fmt.Sprintf("v1_%d", items[len(items)-1].ID))
		v.Set("per_page", strconv.Itoa(per))
		u.RawQuery = v.Encode()
		c.w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, c.origin(), u.RequestURI()))
	}
	c.json(http.StatusOK, items)
}

// delivery finds one of the App's retained deliveries by the path's id,
// answering 404 when there is none.
func (c *apiCall) delivery(appID int64) (*HookDelivery, bool) {
	id, err := strconv.ParseInt(c.param("delivery_id"), 10, 64)
	if err == nil {
		h := &c.f.hooks
		h.mu.Lock()
		d := h.byID[id]
		h.mu.Unlock()
		if d != nil && d.AppID == appID && !d.DeliveredAt.Before(c.f.now().Add(-HookRetention)) {
			return d, true
		}
	}
	c.notFound(docAppHooks)
	return nil, false
}

// GET /app/hook/deliveries/{delivery_id}
func getAppHookDelivery(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	if d, ok := c.delivery(a.id); ok {
		c.json(http.StatusOK, deliveryToJSON(d, true))
	}
}

// POST /app/hook/deliveries/{delivery_id}/attempts: 202, and the delivery
// is sent again (same GUID and payload, redelivery true), recorded as a
// new delivery.
func postAppHookAttempt(c *apiCall) {
	a, ok := c.asApp()
	if !ok {
		return
	}
	d, ok := c.delivery(a.id)
	if !ok {
		return
	}
	if c.f.hooks.config(a.id).url == "" {
		c.error(http.StatusUnprocessableEntity, "The webhook is not active", docAppHooks)
		return
	}
	c.f.redeliver(d)
	c.json(http.StatusAccepted, map[string]any{})
}
