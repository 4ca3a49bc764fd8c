package main

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/spf13/cobra"

	"gitfleet/workflows"
)

// setupCmd registers gitfleet's search attributes in the namespace, once
// per cluster (workers only check them: on Temporal Cloud, the operator
// service that registers them is closed to workers).
func (a *app) setupCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "setup",
		Short: "Register gitfleet's search attributes in the Temporal namespace (once per namespace; workers check them at start)",
		Long: `setup registers the custom search attributes gitfleet's workflows use in the
namespace (TEMPORAL_NAMESPACE) through Temporal's operator service; it is
idempotent. Workers refuse to start while any is missing. On Temporal Cloud,
register them with tcld or the Cloud UI instead: ` + attrList() + `.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := a.setup(cmd.Context()); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(map[string]any{"namespace": a.cfg.Namespace, "searchAttributes": slices.Sorted(maps.Keys(workflows.SearchAttributes))})
			}
			fmt.Fprintf(a.stdout, "search attributes registered in namespace %s: %s\n", a.cfg.Namespace, attrList())
			return nil
		},
	}
}

// setup registers the search attributes in the namespace.
func (a *app) setup(ctx context.Context) error {
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	return workflows.EnsureSearchAttributes(ctx, c, a.cfg.Namespace)
}

func attrList() string {
	var s string
	for i, name := range slices.Sorted(maps.Keys(workflows.SearchAttributes)) {
		if i > 0 {
			s += ", "
		}
		s += name + " (" + workflows.SearchAttributes[name].String() + ")"
	}
	return s
}
