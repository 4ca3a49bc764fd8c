package config

import "fmt"

// Push-time detection (architecture §3, "Push-time detection").
const (
	// EnvWebhookAddr is where a worker receives the GitHub App's webhook
	// deliveries; unset, it receives none.
	EnvWebhookAddr = "GITFLEET_WEBHOOK_ADDR"
	// EnvWebhookSecret is the App's webhook secret, which signs every
	// delivery (given as a file: GITFLEET_WEBHOOK_SECRET_FILE).
	EnvWebhookSecret = "GITFLEET_WEBHOOK_SECRET"
)

// minWebhookSecret is the shortest secret taken: the signature is only as
// strong as the secret (GitHub asks for a random string of high entropy).
const minWebhookSecret = 16

// Webhook is a worker's webhook receiver.
type Webhook struct {
	// Addr: "" receives nothing.
	Addr string
	// Secret: never logged.
	Secret string
}

func loadWebhook(getenv func(string) string) (Webhook, error) {
	w := Webhook{Addr: getenv(EnvWebhookAddr), Secret: getenv(EnvWebhookSecret)}
	switch {
	case w.Addr == "":
	case w.Secret == "":
		return w, fmt.Errorf("%s needs the webhook secret: %s (or %s)", EnvWebhookAddr, FileVar(EnvWebhookSecret), EnvWebhookSecret)
	case len(w.Secret) < minWebhookSecret:
		return w, fmt.Errorf("%s: the webhook secret is %d characters, at least %d are needed", FileVar(EnvWebhookSecret), len(w.Secret), minWebhookSecret)
	}
	return w, nil
}
