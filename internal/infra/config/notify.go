package config

import (
	"fmt"
	"strconv"

	"gitfleet/internal/domain/notify"
)

// Alerts (architecture §8, "Alerts").
const (
	// EnvNotifyURL lists the receivers of alerts, comma-separated: a
	// Slack incoming webhook (host hooks.slack.com, or any URL written
	// slack+https://…) gets Slack's format, any other URL gitfleet's JSON
	// document. Unset: no alert is sent. A secret (a Slack webhook's URL
	// is its credential): GITFLEET_NOTIFY_URL_FILE names a file holding
	// it.
	EnvNotifyURL = "GITFLEET_NOTIFY_URL"
	// EnvNotifyPerMinute bounds the messages sent to one receiver in a
	// minute, across the fleet (default notify.DefaultPerMinute).
	EnvNotifyPerMinute = "GITFLEET_NOTIFY_PER_MINUTE"
)

// Notify is the alerts' configuration.
type Notify struct {
	// Targets: none sends nothing. Their URLs are never logged.
	Targets   []notify.Target
	PerMinute int
}

func loadNotify(getenv func(string) string) (Notify, error) {
	targets, err := notify.ParseTargets(getenv(EnvNotifyURL))
	if err != nil {
		return Notify{}, fmt.Errorf("%s: %w", EnvNotifyURL, err)
	}
	n := Notify{Targets: targets}
	if v := value(getenv, EnvNotifyPerMinute); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 {
			return Notify{}, fmt.Errorf("%s: %q is not a positive number", EnvNotifyPerMinute, v)
		}
		n.PerMinute = p
	}
	return n, nil
}
