package unittest

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"gitfleet/internal/devstack/changeids"
	"gitfleet/workflows"
)

// Every change id the workflows ask for is declared in workflows.Changes,
// and every declared one is still asked for: an id retired from the code
// leaves the list in the same commit (docs/architecture.md, "Retiring a
// change id"). For each id the test says why it is still needed: the
// recorded histories of its workflows that carry neither its marker nor a
// baseline naming it, which replay its old branch, or that none does.
func TestChangeIDsAreDeclaredAndSayWhyTheyStay(t *testing.T) {
	uses, err := changeids.Scan("..")
	if err != nil {
		t.Fatal(err)
	}
	asked := changeids.IDs(uses)
	declared := map[string]workflows.Change{}
	for _, c := range workflows.Changes {
		if _, dup := declared[c.ID]; dup {
			t.Errorf("change id %q declared twice", c.ID)
		}
		if _, err := time.Parse(time.DateOnly, c.Since); err != nil {
			t.Errorf("change id %q: Since %q: %v", c.ID, c.Since, err)
		}
		if len(c.Workflows) == 0 {
			t.Errorf("change id %q names no workflow", c.ID)
		}
		declared[c.ID] = c
	}
	for _, id := range asked {
		if _, ok := declared[id]; !ok {
			t.Errorf("the workflows ask for change id %q, which workflows.Changes does not declare", id)
		}
	}
	for id := range declared {
		if !slices.Contains(asked, id) {
			t.Errorf("workflows.Changes declares %q, which no workflow asks for any more: retire it from the list", id)
		}
	}

	files, err := filepath.Glob(filepath.Join("..", "testdata", "histories", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	type history struct {
		name, workflow string
		markers        []string
	}
	var hs []history
	for _, f := range files {
		hs = append(hs, history{strings.TrimSuffix(filepath.Base(f), ".json"), workflowTypeOf(t, f), versionMarkers(t, f)})
	}
	named := func(wf string, markers []string, id string) bool { // under a baseline naming id
		for _, b := range workflows.Baselines()[wf] {
			if _, ok := b.Changes[id]; ok && slices.Contains(markers, b.ID) {
				return true
			}
		}
		return false
	}
	for _, c := range workflows.Changes {
		var without []string
		for _, h := range hs {
			if slices.Contains(h.markers, c.ID) && !slices.Contains(c.Workflows, h.workflow) {
				t.Errorf("change id %q: history %s of %s carries its marker, but Changes does not list %s", c.ID, h.name, h.workflow, h.workflow)
			}
			if slices.Contains(c.Workflows, h.workflow) && !slices.Contains(h.markers, c.ID) && !named(h.workflow, h.markers, c.ID) {
				without = append(without, h.name)
			}
		}
		why := "runs started before " + c.Since + " take its old branch; no recorded history does"
		if len(without) > 0 {
			why = "runs started before " + c.Since + " take its old branch; recorded without its marker (before it, or not reaching it): " +
				strings.Join(without, ", ")
		}
		t.Logf("%s (%s): %s", c.ID, strings.Join(c.Workflows, ", "), why)
	}
}
