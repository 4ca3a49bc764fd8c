package workflows

// Change is a change id the workflows ask for (version, workflow.GetVersion):
// the workflows whose runs ask for it and the day it landed. A run started
// before then takes its old branch.
type Change struct {
	ID        string
	Workflows []string
	Since     string // YYYY-MM-DD
}

// Changes is every change id still asked for, by id. A change id retires as
// docs/architecture.md says ("Retiring a change id"): its old branch goes
// once no run started before Since can still be open on any installation
// upgrading to the release, and the histories recorded before it go in the
// same commit. The replay tests hold this list to the code and say, for
// each id, which recorded histories still take its old branch.
var Changes = []Change{
	{ID: "batched-cleanup", Workflows: []string{"CleanupStale"}, Since: "2026-11-26"},
	{ID: "build-budget", Workflows: []string{"PropagateSnapshot"}, Since: "2026-11-26"},
	{ID: "build-on-owner", Workflows: []string{"PropagateSnapshot"}, Since: "2026-11-26"},
	{ID: "busy-is-not-offline", Workflows: []string{"PropagateSnapshot"}, Since: "2026-11-26"},
	{ID: "code-scanning-upload", Workflows: []string{"Collect"}, Since: "2026-12-03"},
	{ID: "collect-cancel", Workflows: []string{"Collect"}, Since: "2026-11-26"},
	{ID: "confirm-codebase", Workflows: []string{"Collect"}, Since: "2026-11-26"},
	{ID: "durable-pull-bytes", Workflows: []string{"PropagateSnapshot"}, Since: "2026-12-03"},
	{ID: "git-fallback-gives-way", Workflows: []string{"Collect", "ExecuteShard", "PropagateSnapshot", "ResolveIdentity", "ValidateSecrets"}, Since: "2026-12-03"},
	{ID: "git-task-queue", Workflows: []string{"Collect", "ExecuteShard", "ResolveIdentity"}, Since: "2026-11-26"},
	{ID: "gone-needs-proof", Workflows: []string{"ResolveIdentity"}, Since: "2026-11-26"},
	{ID: "manual-resets-failures", Workflows: []string{"Collect"}, Since: "2026-11-22"},
	{ID: "missing-name-by-id", Workflows: []string{"ResolveIdentity"}, Since: "2026-12-03"},
	{ID: "notify-after-scan", Workflows: []string{"ExecuteShard"}, Since: "2026-12-03"},
	{ID: "notify-valid", Workflows: []string{"ValidateSecrets"}, Since: "2026-12-03"},
	{ID: "one-mirror-sync", Workflows: []string{"ExecuteShard"}, Since: "2026-11-24"},
	{ID: "org-bounded-running", Workflows: []string{"CollectOrg"}, Since: "2026-12-03"},
	{ID: "outcome-attributes", Workflows: []string{"Collect", "ExecuteShard", "NotifySecrets", "UploadCodeScanning", "ValidateSecrets"}, Since: "2026-11-25"},
	{ID: "parked-fails-run", Workflows: []string{"ExecuteShard"}, Since: "2026-11-26"},
	{ID: "pipelined-fanout", Workflows: []string{"PropagateSnapshot"}, Since: "2026-12-03"},
	{ID: "propagate-continue-as-new", Workflows: []string{"PropagateSnapshot"}, Since: "2026-11-26"},
	{ID: "push-follow-up", Workflows: []string{"Collect"}, Since: "2026-12-03"},
	{ID: "race-created-at", Workflows: []string{"ResolveIdentity"}, Since: "2026-11-22"},
	{ID: "recheck-inherited-place", Workflows: []string{"ExecuteShard"}, Since: "2026-12-03"},
	{ID: "refusal-unexplained-says-why", Workflows: []string{"Collect"}, Since: "2026-12-03"},
	{ID: "refused-asks-api", Workflows: []string{"Collect"}, Since: "2026-11-25"},
	{ID: "replaced-scan-takes-over", Workflows: []string{"ExecuteShard"}, Since: "2026-12-03"},
	{ID: "repository-affinity", Workflows: []string{"Collect", "ExecuteShard", "PropagateSnapshot", "ResolveIdentity", "ValidateSecrets"}, Since: "2026-11-26"},
	{ID: "scan-after-identity", Workflows: []string{"Collect"}, Since: "2026-11-22"},
	{ID: "settle-abandons-only-permanent", Workflows: []string{"PropagateSnapshot"}, Since: "2026-11-25"},
	{ID: "shard-failure-model", Workflows: []string{"ExecuteShard"}, Since: "2026-11-26"},
	{ID: "silent-runner-offline", Workflows: []string{"PropagateSnapshot"}, Since: "2026-12-03"},
	{ID: "skip-current-scan", Workflows: []string{"Collect"}, Since: "2026-11-26"},
	{ID: "sweep-batched-starts", Workflows: []string{"RecollectionSweep"}, Since: "2026-11-25"},
	{ID: "sweep-bounded-running", Workflows: []string{"RecollectionSweep"}, Since: "2026-11-26"},
	{ID: "sweep-event-budget", Workflows: []string{"RecollectionSweep"}, Since: "2026-11-25"},
	{ID: "sweep-host-breaker", Workflows: []string{"RecollectionSweep"}, Since: "2026-12-03"},
	{ID: "sweep-newest-first", Workflows: []string{"RecollectionSweep"}, Since: "2026-12-03"},
	{ID: "sweep-ranges", Workflows: []string{"RecollectionSweep"}, Since: "2026-12-03"},
	{ID: "sweep-unseen-started", Workflows: []string{"RecollectionSweep"}, Since: "2026-11-26"},
	{ID: "validate-after-scan", Workflows: []string{"ExecuteShard"}, Since: "2026-11-26"},
}
