// Package notify is the pure logic of alerts (architecture §8, "Alerts"):
// which receivers the setting names and in which format, the key that
// deduplicates an alert, the message one repository's alerts of one scan
// make, and the fleet-wide rate bound. A message carries what the reports
// carry — repository, rule, path, commit, the redacted preview, validity
// and a link — never a secret; a receiver's URL is a secret of its own
// (a Slack webhook's path is its credential) and appears in no message,
// error or log line: receivers are named by their Digest.
package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Kind is what an alert announces.
type Kind string

const (
	// KindNew: a scan found a secret no alert announced before.
	KindNew Kind = "new"
	// KindValid: a validity check found a secret working.
	KindValid Kind = "valid"
)

// Format is how a receiver takes a message.
type Format string

const (
	// FormatJSON is gitfleet's own JSON document (Message), for any
	// webhook receiver.
	FormatJSON Format = "json"
	// FormatSlack is a Slack incoming webhook's: {"text", "blocks"}.
	FormatSlack Format = "slack"
)

// slackPrefix marks a URL whose receiver speaks Slack's format on
// another host than Slack's (a proxy, a Mattermost server, a test).
const slackPrefix = "slack+"

// slackHost is Slack's incoming webhooks' host.
const slackHost = "hooks.slack.com"

// Target is one receiver.
type Target struct {
	// URL is where messages are POSTed: a secret, never logged.
	URL    string
	Format Format
}

// Digest names the receiver wherever its URL must not go (workflow
// histories, logs, the database).
func (t Target) Digest() string { return Digest(t.URL) }

// Digest is a short SHA-256 of a receiver's URL.
func Digest(rawURL string) string {
	sum := sha256.Sum256([]byte(rawURL))
	return hex.EncodeToString(sum[:8])
}

// ParseTargets reads the setting: URLs separated by commas, each http or
// https; one with the host hooks.slack.com, or written with the prefix
// slack+ (slack+https://…), gets Slack's format, any other the JSON
// document. Errors name a URL by its position, never by its text.
func ParseTargets(setting string) ([]Target, error) {
	var out []Target
	seen := map[string]bool{}
	for i, raw := range strings.Split(setting, ",") {
		raw = strings.TrimSpace(raw)
		if raw == "" {
			continue
		}
		t := Target{URL: raw, Format: FormatJSON}
		if rest, ok := strings.CutPrefix(raw, slackPrefix); ok {
			t.URL, t.Format = rest, FormatSlack
		}
		u, err := url.Parse(t.URL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return nil, fmt.Errorf("URL %d is not an http(s) URL", i+1)
		}
		if strings.EqualFold(u.Hostname(), slackHost) {
			t.Format = FormatSlack
		}
		if seen[t.URL] {
			continue
		}
		seen[t.URL] = true
		out = append(out, t)
	}
	return out, nil
}

// Fingerprint is the key an alert is deduplicated by, with the receiver
// and the kind: the secret, across the fleet. A secret with a hash is
// its rule and keyed hash wherever it is found (a copy in a fork is not
// new to the fleet); a path-only rule's, which has no hash, is the file
// in its repository (subject: the shard's key).
func Fingerprint(rule, secretHash, subject, secretPath string) string {
	var in string
	if secretHash != "" {
		in = "h\x00" + rule + "\x00" + secretHash
	} else {
		in = "p\x00" + subject + "\x00" + rule + "\x00" + secretPath
	}
	sum := sha256.Sum256([]byte(in))
	return hex.EncodeToString(sum[:16])
}

// Alert is one secret, as a message shows it.
type Alert struct {
	Rule    string `json:"rule"`
	Path    string `json:"path"`
	Line    int    `json:"line,omitempty"`
	Commit  string `json:"commit"`
	Preview string `json:"preview"`
	// Validity is the last check's state (valid, invalid, unknown), or
	// "unchecked".
	Validity string `json:"validity"`
	Link     string `json:"link,omitempty"`
	// Fingerprint is the dedup key (not shown; not the secret's hash).
	Fingerprint string `json:"-"`
}

// Message is one repository's alerts of one scan (or one check): the
// JSON document a generic receiver gets.
type Message struct {
	// ID is the same in every attempt at sending it: a receiver may drop
	// a message whose ID it has seen (also in X-Gitfleet-Delivery).
	ID         string  `json:"id"`
	Kind       Kind    `json:"kind"`
	Repository string  `json:"repository"`
	Summary    string  `json:"summary"`
	Alerts     []Alert `json:"alerts"`
	// Total counts the alerts the message stands for; past MaxListed the
	// rest are counted, not listed (Link shows them all).
	Total int `json:"total"`
	// Link is where the repository's secrets are (its page on the
	// forge), when known.
	Link string `json:"link,omitempty"`
}

// MaxListed bounds the alerts a message lists: a scan that finds
// thousands still sends one readable message (Slack refuses more than 50
// blocks).
const MaxListed = 40

// Build makes the message of one repository's alerts. An empty list
// makes none.
func Build(id string, kind Kind, repository, link string, alerts []Alert) (Message, bool) {
	if len(alerts) == 0 {
		return Message{}, false
	}
	m := Message{ID: id, Kind: kind, Repository: repository, Total: len(alerts), Link: link}
	m.Alerts = alerts[:min(len(alerts), MaxListed)]
	m.Summary = summary(kind, repository, len(alerts))
	return m, true
}

func summary(kind Kind, repository string, n int) string {
	secrets := "1 secret"
	if n != 1 {
		secrets = strconv.Itoa(n) + " secrets"
	}
	if kind == KindValid {
		return fmt.Sprintf("gitfleet: %s in %s found valid by its provider", secrets, repository)
	}
	return fmt.Sprintf("gitfleet: %s new to the fleet in %s", secrets, repository)
}

// Body is the message as the format sends it.
func (m Message) Body(f Format) ([]byte, error) {
	if f != FormatSlack {
		return json.Marshal(m)
	}
	type text struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	type block struct {
		Type string `json:"type"`
		Text *text  `json:"text,omitempty"`
	}
	blocks := []block{{Type: "section", Text: &text{Type: "mrkdwn", Text: "*" + slackEscape(m.Summary) + "*"}}}
	for _, a := range m.Alerts {
		where := slackEscape(a.Path)
		if a.Line > 0 {
			where += ":" + strconv.Itoa(a.Line)
		}
		if a.Link != "" {
			where = "<" + a.Link + "|" + where + ">"
		}
		commit := a.Commit[:min(len(a.Commit), 12)]
		blocks = append(blocks, block{Type: "section", Text: &text{Type: "mrkdwn", Text: fmt.Sprintf("`%s` %s at `%s`\npreview `%s` · validity %s",
			slackEscape(a.Rule), where, slackEscape(commit), slackEscape(a.Preview), slackEscape(a.Validity))}})
	}
	if rest := m.Total - len(m.Alerts); rest > 0 {
		more := fmt.Sprintf("and %d more", rest)
		if m.Link != "" {
			more += ": <" + m.Link + "|" + slackEscape(m.Repository) + ">"
		}
		blocks = append(blocks, block{Type: "section", Text: &text{Type: "mrkdwn", Text: more}})
	}
	return json.Marshal(struct {
		Text   string  `json:"text"`
		Blocks []block `json:"blocks"`
	}{Text: m.Summary, Blocks: blocks})
}

// slackEscape escapes what Slack's mrkdwn takes for markup.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", "`", "'").Replace(s)
}

// BlobLink is the page of the file at the commit on a collected
// repository's host (https://host/owner/name/blob/commit/path#Lline), as
// the reports link it; "" for a scan target, which has no page.
func BlobLink(repository string, collected bool, commit, path string, line int) string {
	if !collected || repository == "" || commit == "" {
		return ""
	}
	l := "https://" + repository + "/blob/" + url.PathEscape(commit) + "/" + (&url.URL{Path: path}).EscapedPath()
	if line > 0 {
		l += "#L" + strconv.Itoa(line)
	}
	return l
}

// Outcome is what a receiver's answer means for the message.
type Outcome int

const (
	// Delivered: a 2xx.
	Delivered Outcome = iota
	// Retry: the receiver may take it later (429, 408, 5xx, no answer).
	Retry
	// Refused: the receiver will not take it (any other 4xx, a
	// redirect: a Slack webhook removed answers 404 or 410).
	Refused
)

// Classify says what an HTTP status means for a message.
func Classify(status int) Outcome {
	switch {
	case status >= 200 && status < 300:
		return Delivered
	case status == 408 || status == 429 || status >= 500:
		return Retry
	default:
		return Refused
	}
}

// DefaultPerMinute is the fleet-wide bound on the messages sent to one
// receiver in a minute (GITFLEET_NOTIFY_PER_MINUTE): Slack takes about
// one a second per webhook, and a burst of scans must not be refused.
const DefaultPerMinute = 30

// Window is the rate bound's window.
const Window = time.Minute

// Wait is how long a send must wait under the bound of perMinute
// messages to one receiver in a Window, given when the sends of the last
// Window went (any order): 0 when a slot is free now, else until the
// oldest of the window leaves it.
func Wait(sent []time.Time, now time.Time, perMinute int) time.Duration {
	if perMinute <= 0 {
		return 0
	}
	var inWindow []time.Time
	for _, t := range sent {
		if now.Sub(t) < Window {
			inWindow = append(inWindow, t)
		}
	}
	if len(inWindow) < perMinute {
		return 0
	}
	// The (len-perMinute+1)-th oldest must leave for a slot to free.
	slices.SortFunc(inWindow, time.Time.Compare)
	return inWindow[len(inWindow)-perMinute].Add(Window).Sub(now)
}
