package activities

import "context"

// WithinBound exposes withinBound to the package's external tests (a
// function: an exported method would be registered as an activity).
func WithinBound(ctx context.Context, c *CodeScanning, account string) error {
	return c.withinBound(ctx, account)
}
