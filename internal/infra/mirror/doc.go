// Package mirror keeps local bare mirrors of remote repositories with
// go-git, and answers the two questions identity resolution asks of a remote
// without any API call: "where does this URL really lead?" (redirects of
// renamed repositories) and "does the remote still have commit X?" (fetch by
// SHA; docs/architecture.md §3).
//
// Mirrors live at a deterministic path per remote URL (a digest, so no path
// from user input ever reaches the file system) and are safe to use from
// several goroutines and processes at once. Correctness never depends on a
// mirror surviving: any worker can recreate one from scratch.
//
// A remote is not trusted: its redirects are followed within the origin
// asked only (and never from https to http), checked before each hop, by
// the probe and by go-git's own requests; its reference advertisement is
// read up to 64 MiB; the packs it sends are bounded by gitread's limits.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package mirror
