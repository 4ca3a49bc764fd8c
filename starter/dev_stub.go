//go:build !devstack

package main

import (
	"errors"

	"github.com/spf13/cobra"
)

// devCmd in the production build only says where the dev stack is: the
// forge, the private PostgreSQL cluster and the Temporal CLI launcher are
// development tooling and are not linked into this binary.
func (a *app) devCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "dev",
		Short: "Run the whole stack locally (development build only: make run)",
		Args:  args(cobra.ArbitraryArgs),
		RunE: func(*cobra.Command, []string) error {
			return usageError{errors.New("this starter is the production build, without the dev stack: " +
				"run `make run`, or build bin/starter-dev with `go build -tags devstack -o bin/starter-dev ./starter`")}
		},
	}
}
