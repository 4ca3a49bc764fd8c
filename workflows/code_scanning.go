package workflows

import (
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"gitfleet/internal/domain/codescan"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
)

// GitHub code scanning (architecture §8, "Where developers look: code
// scanning"): with GITFLEET_CODE_SCANNING=on, a collection whose
// repository's results changed since the last upload starts
// UploadCodeScanning, a child it abandons, which uploads the repository's
// SARIF for its default branch's commit, waits for GitHub to process it,
// and sends it once more when processing fails. Collect's history grows by
// a version marker, a side effect and one activity (CodeScanningDue), and
// a child start when an upload is due. Nothing here carries a token or a
// secret: ids, states and GitHub's messages only.

// The activities of code scanning (activities.CodeScanning).
const (
	activityCodeScanningDue = "CodeScanningDue" // CodeScanningDueInput → CodeScanningDueResult
	activityUploadSARIF     = "UploadSARIF"     // UploadSARIFInput → UploadSARIFResult
	activitySARIFStatus     = "SARIFStatus"     // upload row id → SARIFStatusResult
)

// CodeScanningActivityNames are the activities of activities.CodeScanning.
var CodeScanningActivityNames = []string{activityCodeScanningDue, activityUploadSARIF, activitySARIFStatus}

// codeScanningChange: the collections that may upload to code scanning;
// runs recorded before never did.
const codeScanningChange = "code-scanning-upload"

// codeScanningOn is the worker's setting (SetCodeScanning).
var codeScanningOn atomic.Bool

// SetCodeScanning says whether collections upload to code scanning
// (GITFLEET_CODE_SCANNING=on).
func SetCodeScanning(on bool) { codeScanningOn.Store(on) }

// CodeScanningOn reports the worker's setting: SyncMirror tells it to
// the collection.
func CodeScanningOn() bool { return codeScanningOn.Load() }

// CodeScanningWorkflowID is the id of a codebase's upload: one at a time.
func CodeScanningWorkflowID(codebaseID int64) string {
	return "code-scanning:codebase:" + strconv.FormatInt(codebaseID, 10)
}

// CodeScanningDueInput asks whether a codebase's results are to be
// uploaded.
type CodeScanningDueInput struct {
	CodebaseID int64 `json:"codebaseId"`
}

// CodeScanningDueResult says whether, and why.
type CodeScanningDueResult struct {
	Due bool   `json:"due"`
	Why string `json:"why"`
}

// UploadCodeScanningInput names the repository and the commit its results
// are uploaded for: its default branch's head as the collection saw it.
type UploadCodeScanningInput struct {
	CodebaseID int64     `json:"codebaseId"`
	Repo       repoid.ID `json:"repository"`
	Commit     string    `json:"commit"`
	Branch     string    `json:"branch"`
}

// UploadSARIFInput is one attempt at an upload.
type UploadSARIFInput struct {
	UploadCodeScanningInput
	Attempt int `json:"attempt"`
}

// UploadSARIFResult is the recorded upload (its row) and its state:
// pending once sent, not_sent with the reason otherwise.
type UploadSARIFResult struct {
	UploadID int64  `json:"uploadId"`
	State    string `json:"state"`
	Message  string `json:"message,omitempty"`
}

// SARIFStatusResult is an upload's processing state as GitHub said it
// (recorded on its row), with GitHub's errors when it failed.
type SARIFStatusResult struct {
	State   string `json:"state"`
	Message string `json:"message,omitempty"`
}

// UploadCodeScanningResult is the last attempt's outcome.
type UploadCodeScanningResult struct {
	UploadID int64  `json:"uploadId"`
	State    string `json:"state"`
	Attempts int    `json:"attempts"`
	Message  string `json:"message,omitempty"`
}

// uploadOptions: an upload may wait for the installation's bound
// (GITFLEET_CODE_SCANNING_PER_HOUR): the activity asks to be retried when
// a slot frees, within the hour and a bit.
var uploadOptions = workflow.ActivityOptions{
	StartToCloseTimeout:    2 * time.Minute,
	ScheduleToCloseTimeout: 90 * time.Minute,
	RetryPolicy:            retryPolicy(0),
}

// uploadAfterCollect starts the codebase's upload when its results changed
// (CodeScanningDue). Any trouble is logged, never the collection's
// failure: code scanning is a view of what the database holds, and the
// next collection looks again.
func uploadAfterCollect(ctx workflow.Context, out CollectResult, on bool) {
	if out.CodebaseID == 0 || out.Commit == "" || out.DefaultBranch == "" || !on {
		return
	}
	var due CodeScanningDueResult
	if err := workflow.ExecuteActivity(withOptions(ctx, dbOptions), activityCodeScanningDue,
		CodeScanningDueInput{CodebaseID: out.CodebaseID}).Get(ctx, &due); err != nil {
		workflow.GetLogger(ctx).Warn("Could not tell whether code scanning is due", "error", message(err))
		return
	}
	if !due.Due {
		return
	}
	cctx := workflow.WithChildOptions(ctx, workflow.ChildWorkflowOptions{
		WorkflowID:            CodeScanningWorkflowID(out.CodebaseID),
		ParentClosePolicy:     enumspb.PARENT_CLOSE_POLICY_ABANDON,
		WorkflowIDReusePolicy: enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		WorkflowRunTimeout:    3 * time.Hour,
		Memo:                  map[string]any{"repository": out.Repository.String(), "why": due.Why},
	})
	f := workflow.ExecuteChildWorkflow(cctx, UploadCodeScanning, UploadCodeScanningInput{
		CodebaseID: out.CodebaseID, Repo: out.Repository, Commit: out.Commit, Branch: out.DefaultBranch})
	if err := f.GetChildWorkflowExecution().Get(ctx, nil); err != nil {
		// One already runs: the next collection sees whether it sent the
		// latest results.
		workflow.GetLogger(ctx).Info("Code scanning upload not started", "codebase", out.CodebaseID, "error", message(err))
	}
}

// UploadCodeScanning uploads a codebase's SARIF to code scanning and waits
// for its processing (codescan.PollDelay, at most codescan.MaxPolls
// looks); a failed processing is sent once more (codescan.MaxAttempts),
// and the last outcome stays on the upload's row, which `starter show`
// prints. Without the App's permission nothing is sent and the row says
// why.
func UploadCodeScanning(ctx workflow.Context, in UploadCodeScanningInput) (UploadCodeScanningResult, error) {
	var out UploadCodeScanningResult
	for attempt := 1; attempt <= codescan.MaxAttempts; attempt++ {
		workflow.SetCurrentDetails(ctx, fmt.Sprintf("Uploading the SARIF of %s at %s (attempt %d)", in.Repo, in.Commit, attempt))
		var up UploadSARIFResult
		if err := workflow.ExecuteActivity(withOptions(ctx, uploadOptions), activityUploadSARIF,
			UploadSARIFInput{UploadCodeScanningInput: in, Attempt: attempt}).Get(ctx, &up); err != nil {
			setOutcome(ctx, OutcomeFailed, message(err))
			return out, err
		}
		out = UploadCodeScanningResult{UploadID: up.UploadID, State: up.State, Attempts: attempt, Message: up.Message}
		if up.State != codescan.Pending {
			setOutcome(ctx, OutcomeDone, "not sent: "+up.Message)
			return out, nil
		}
		for i := 0; i < codescan.MaxPolls && out.State == codescan.Pending; i++ {
			if err := workflow.Sleep(ctx, codescan.PollDelay(i)); err != nil {
				return out, err
			}
			var st SARIFStatusResult
			if err := workflow.ExecuteActivity(withOptions(ctx, apiOptions), activitySARIFStatus, up.UploadID).Get(ctx, &st); err != nil {
				setOutcome(ctx, OutcomeFailed, message(err))
				return out, err
			}
			out.State, out.Message = st.State, st.Message
		}
		if out.State != codescan.Failed {
			break
		}
		workflow.GetLogger(ctx).Warn("Code scanning could not process the upload", "attempt", attempt, "errors", out.Message)
	}
	switch out.State {
	case codescan.Complete:
		setOutcome(ctx, OutcomeDone, fmt.Sprintf("upload %d processed", out.UploadID))
	case codescan.Failed:
		setOutcome(ctx, OutcomeFailed, "code scanning could not process the upload: "+out.Message)
		return out, temporal.NewNonRetryableApplicationError("code scanning could not process the upload: "+out.Message,
			string(errclass.Permanent), nil)
	default:
		setOutcome(ctx, OutcomeDone, fmt.Sprintf("upload %d still %s after %d looks", out.UploadID, out.State, codescan.MaxPolls))
	}
	return out, nil
}
