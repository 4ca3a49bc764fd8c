package versioning_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/mock"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"gitfleet/workflows/versioning"
)

const def = workflow.DefaultVersion

var (
	first  = versioning.Baseline{ID: "w-baseline-1", Changes: map[string]workflow.Version{"a": 1, "b": 1}}
	second = versioning.Baseline{ID: "w-baseline-2", Changes: map[string]workflow.Version{"a": 1, "b": 2, "c": 1}}
)

// A run is modelled by the version markers its history holds: a new run
// (recorded == nil) gets every GetVersion's max and records it; a run
// being replayed gets its markers, and DefaultVersion for a change id it
// has no marker of (what the SDK does).
func TestVersion(t *testing.T) {
	for _, tc := range []struct {
		name     string
		line     versioning.Line
		recorded map[string]workflow.Version // nil: a new run
		change   string
		max      workflow.Version
		want     workflow.Version
		asked    []string // the GetVersion calls, in order
	}{
		{"a new run has the baseline's changes with one marker", versioning.Line{first}, nil, "a", 1, 1,
			[]string{"w-baseline-1"}},
		{"a new run asks for a change the baseline does not name", versioning.Line{first}, nil, "c", 1, 1,
			[]string{"w-baseline-1", "c"}},
		// The old scheme returned the baseline's 1 here: a bump after the
		// baseline never reached a new run.
		{"a new run gets a bump made after the baseline", versioning.Line{first}, nil, "b", 2, 2,
			[]string{"w-baseline-1", "b"}},
		{"a run recorded under the baseline before the bump keeps the baseline's version",
			versioning.Line{first}, map[string]workflow.Version{"w-baseline-1": 1}, "b", 2, 1,
			[]string{"w-baseline-1", "b"}},
		{"a run recorded under the baseline after the bump keeps the bump",
			versioning.Line{first}, map[string]workflow.Version{"w-baseline-1": 1, "b": 2}, "b", 2, 2,
			[]string{"w-baseline-1", "b"}},
		{"a run recorded before any baseline asks as it did",
			versioning.Line{first}, map[string]workflow.Version{}, "a", 1, def,
			[]string{"w-baseline-1", "a"}},
		{"a new run records only the newest baseline", versioning.Line{second, first}, nil, "b", 2, 2,
			[]string{"w-baseline-2"}},
		// The old scheme had one baseline: replacing it by its successor
		// gave this run no baseline, and change b its DefaultVersion.
		{"a run recorded under the older baseline keeps it after a successor",
			versioning.Line{second, first}, map[string]workflow.Version{"w-baseline-1": 1}, "b", 2, 1,
			[]string{"w-baseline-2", "w-baseline-1", "b"}},
		{"a run recorded under the older baseline asks for a change only the successor names",
			versioning.Line{second, first}, map[string]workflow.Version{"w-baseline-1": 1}, "c", 1, def,
			[]string{"w-baseline-2", "w-baseline-1", "c"}},
		{"a run recorded before any baseline stays without one after a successor",
			versioning.Line{second, first}, map[string]workflow.Version{"b": 1}, "b", 2, 1,
			[]string{"w-baseline-2", "w-baseline-1", "b"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, asked, err := run(t, tc.line, tc.recorded, tc.change, tc.max)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want || !slices.Equal(asked, tc.asked) {
				t.Fatalf("version %d after asking %v, want %d after %v", got, asked, tc.want, tc.asked)
			}
		})
	}
}

// Code that asks for less than the baseline recorded no longer has the
// version the run took: the workflow task fails, no branch is guessed.
func TestVersionBelowTheBaselineFails(t *testing.T) {
	_, _, err := run(t, versioning.Line{second}, nil, "b", 1)
	if err == nil || !strings.Contains(err.Error(), "baseline w-baseline-2 records version 2") {
		t.Fatalf("error = %v, want the baseline's version named", err)
	}
}

func run(t *testing.T, line versioning.Line, recorded map[string]workflow.Version, change string, max workflow.Version) (workflow.Version, []string, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(func(ctx workflow.Context) (workflow.Version, error) {
		return versioning.Version(line.Apply(ctx), change, max), nil
	}, workflow.RegisterOptions{Name: "probe"})
	var asked []string
	history := func(id string, _, max workflow.Version) workflow.Version {
		asked = append(asked, id)
		if recorded == nil {
			return max
		}
		if v, ok := recorded[id]; ok {
			return v
		}
		return def
	}
	for m := workflow.Version(1); m <= 3; m++ {
		env.OnGetVersion(mock.Anything, def, m).Return(history).Maybe()
	}
	env.ExecuteWorkflow("probe")
	if err := env.GetWorkflowError(); err != nil {
		return 0, asked, err
	}
	var v workflow.Version
	if err := env.GetWorkflowResult(&v); err != nil {
		t.Fatal(err)
	}
	return v, asked, nil
}
