// Command worker runs gitfleet's Temporal worker: it checks the search
// attributes (`starter setup` registers them), waits for the database's
// migrations (`starter migrate` applies them), and polls
// task queue "gitfleet" for workflow and activity tasks until interrupted;
// then it stops polling and lets running activities finish (up to
// GITFLEET_STOP_TIMEOUT). /metrics, /livez and /readyz are served on
// GITFLEET_METRICS_ADDR.
//
// It also polls the Git queue of the repositories it owns
// (gitfleet:git:<worker-id>, and the shared gitfleet:git) and heartbeats in the workers table; with
// --runner-id it runs a runner instead (snapshot pulls on its own queues).
//
// Invariants: a worker (not a runner) without a finding key exits at start, before it
// connects to anything; a stopping worker leaves the fleet before it
// drains, so new work goes to the next owners at once; a worker whose
// pollers stop for good exits 1 rather than serve green health checks.
package main
