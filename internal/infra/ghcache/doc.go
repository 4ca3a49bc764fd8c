// Package ghcache is the GitHub API cache per user (architecture §6): reads are
// served from the database, cache first and without TTL; a miss or an
// explicit refresh fetches the whole view first and replaces the cached
// rows in one transaction, so a GitHub failure leaves the old cache intact
// and serving.
//
// Concurrent readers of one user in a process share one refresh (on a
// context none of them owns, so one giving up cancels nobody else's); across
// processes the Refresher joins a refresh already running (a workflow with a
// per-user id). The package imports no Temporal: the Refresher is given.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package ghcache
