package workflows

import "time"

// Internals the external tests (package workflows_test) look at.
const PagesPerRun = pagesPerRun

// SetNotifyRetry makes alerts' retries short for a test (a receiver down,
// or answering 500, is tried again within it); the returned func restores
// them.
func SetNotifyRetry(initial, maximum time.Duration) func() {
	was := notifyRetry
	p := *was
	p.InitialInterval, p.MaximumInterval = initial, maximum
	notifyRetry = &p
	return func() { notifyRetry = was }
}
