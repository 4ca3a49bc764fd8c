package unittest

import (
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"gitfleet/activities"
	"gitfleet/internal/infra/errclass"
	"gitfleet/workflows"
)

// One repository whose check fails does not stop the others: its secrets
// are counted as not checked, and the run says the next one tries again.
func TestValidateSecretsGoesOnPastAFailedRepository(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ValidateSecrets)
	env.RegisterActivity(&activities.Validity{})
	env.RegisterActivity(&activities.Activities{})
	var v *activities.Validity
	var placer *activities.Activities
	env.OnActivity(placer.PlaceGitWork, mock.Anything, mock.Anything).Return(workflows.GitTaskQueue(workflows.TaskQueue), nil)
	env.OnActivity(v.ListValidation, mock.Anything, mock.Anything).Return(workflows.ValidationPage{Enabled: true, Groups: []workflows.ValidationGroup{
		{ShardID: 1, Location: "/a", Findings: []int64{10, 11}},
		{ShardID: 2, Location: "/b", Findings: []int64{20}},
		{ShardID: 3, Location: "/c", Findings: []int64{30, 31, 32}},
	}}, nil).Once()
	env.OnActivity(v.ValidateSecrets, mock.Anything, workflows.ValidateBatchInput{ShardID: 1, Findings: []int64{10, 11}}).
		Return(workflows.ValidationCounts{Checked: 2, Valid: 1, Invalid: 1, Revoked: 1}, nil)
	env.OnActivity(v.ValidateSecrets, mock.Anything, workflows.ValidateBatchInput{ShardID: 2, Findings: []int64{20}}).
		Return(workflows.ValidationCounts{}, temporal.NewNonRetryableApplicationError("the database refused", string(errclass.Permanent), nil))
	env.OnActivity(v.ValidateSecrets, mock.Anything, workflows.ValidateBatchInput{ShardID: 3, Findings: []int64{30, 31, 32}}).
		Return(workflows.ValidationCounts{Checked: 3, Unknown: 3}, nil)
	env.ExecuteWorkflow(workflows.ValidateSecrets, workflows.ValidateSecretsInput{Trigger: "schedule"})
	var out workflows.ValidateSecretsResult
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	want := workflows.ValidationCounts{Checked: 5, Valid: 1, Invalid: 1, Revoked: 1, Unknown: 3, NotChecked: 1}
	if out.ValidationCounts != want || !out.Enabled || out.Runs != 1 {
		t.Fatalf("result %+v, want %+v", out, want)
	}
}

// Off, the run ends at its first page, having scheduled no check.
func TestValidateSecretsOff(t *testing.T) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(workflows.ValidateSecrets)
	env.RegisterActivity(&activities.Validity{})
	var v *activities.Validity
	env.OnActivity(v.ListValidation, mock.Anything, mock.Anything).Return(workflows.ValidationPage{}, nil).Once()
	env.ExecuteWorkflow(workflows.ValidateSecrets, workflows.ValidateSecretsInput{Trigger: "schedule"})
	var out workflows.ValidateSecretsResult
	if err := env.GetWorkflowResult(&out); err != nil {
		t.Fatal(err)
	}
	if out.Enabled || out.Checked != 0 {
		t.Fatalf("result %+v", out)
	}
	env.AssertExpectations(t)
}
