package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

// validityFilter is FleetFilter.Validity for --valid and --validity.
func validityFilter(valid bool, want []string) ([]string, error) {
	var out []string
	if valid {
		out = append(out, "valid")
	}
	for _, w := range want {
		w = strings.ToLower(strings.TrimSpace(w))
		if !slices.Contains(store.ValidityFilters, w) {
			return nil, usageError{fmt.Errorf("--validity %q: one of %s", w, strings.Join(store.ValidityFilters, ", "))}
		}
		out = append(out, w)
	}
	return out, nil
}

// validityText is a secret's last check and its age: "valid 2h ago",
// "invalid 1d ago (revoked)", "unknown 5m ago (rate-limited)", "-" when
// never checked.
func validityText(v *store.Validity) string {
	if v == nil {
		return "-"
	}
	s := v.State + " " + ago(v.CheckedAt)
	switch {
	case v.RevokedAt != nil && v.State == "invalid":
		s += " (revoked)"
	case v.Class != "":
		s += " (" + textsafe.Printable(v.Class) + ")"
	}
	return s
}

// factsText is the facts a check recorded, one line.
func factsText(raw json.RawMessage) string {
	var f struct {
		Account string   `json:"account"`
		KeyID   string   `json:"keyId"`
		Scopes  []string `json:"scopes"`
		Note    string   `json:"note"`
	}
	if json.Unmarshal(raw, &f) != nil {
		return ""
	}
	var parts []string
	if f.Account != "" {
		parts = append(parts, "account "+f.Account)
	}
	if f.KeyID != "" {
		parts = append(parts, "key id "+f.KeyID)
	}
	if len(f.Scopes) > 0 {
		parts = append(parts, "scopes "+strings.Join(f.Scopes, ", "))
	}
	if f.Note != "" {
		parts = append(parts, f.Note)
	}
	return textsafe.Printable(strings.Join(parts, "; "))
}

func (a *app) findingsValidateCmd() *cobra.Command {
	var sel selectionFlags
	var rule string
	var wait time.Duration
	cmd := &cobra.Command{
		Use:   "validate REPO [SECRET-HASH-PREFIX]",
		Short: "Check now whether a repository's secrets still work, with their providers",
		Long: `validate asks the providers of a repository's open secrets (or of one secret)
whether they still accept them, now, through the workers — the same check the
daily schedule secret-revalidation makes — and prints what each answered:
valid, invalid (revoked when it was valid before) or unknown, and why.

Only with GITFLEET_VALIDATE=on on the workers: the workers read each secret
again from their mirror and send it to its provider's own API (architecture
§11, "Validity checks"); off, nothing is sent and validate says so.`,
		Example: `  starter findings validate acme/api
  starter findings validate acme/api 5f0c7a1e`,
		Args: args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, in []string) error {
			ctx := cmd.Context()
			var shardID int64
			var subject, what, hash string
			var st *store.Store
			if len(in) == 2 {
				f, err := a.findSecret(ctx, in, secretArgs{sel: sel, rule: rule})
				if err != nil {
					return err
				}
				st, shardID, subject, what, hash = f.st, f.shard.ID, f.shard.Key, f.what, f.secret.SecretHash
			} else {
				var err error
				if st, err = a.store(ctx); err != nil {
					return err
				}
				key, w, err := a.shardKeyOf(ctx, st, in[0], sel)
				if err != nil {
					st.Close()
					return err
				}
				sh, err := st.ShardByKey(ctx, key)
				if err != nil {
					st.Close()
					return err
				}
				if sh == nil {
					st.Close()
					return usageError{fmt.Errorf("%s has not been scanned yet", w)}
				}
				shardID, subject, what = sh.ID, sh.Key, w
			}
			defer st.Close()
			c, err := a.temporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			wctx, cancel := context.WithTimeout(ctx, wait)
			defer cancel()
			run, err := c.ExecuteWorkflow(wctx, client.StartWorkflowOptions{
				ID:        fmt.Sprintf("validate:manual:%d:%d", shardID, time.Now().UnixNano()),
				TaskQueue: workflows.TaskQueue,
				Memo:      map[string]any{"target": "secrets of " + what},
			}, workflows.ValidateSecrets, workflows.ValidateSecretsInput{ShardID: shardID, SecretHash: hash, Trigger: "manual"})
			if err != nil {
				return err
			}
			var out workflows.ValidateSecretsResult
			if err := run.Get(wctx, &out); err != nil {
				if errors.Is(wctx.Err(), context.DeadlineExceeded) {
					return fmt.Errorf("%s: the check %s is still running after %s (the Web UI follows it)", what, run.GetID(), wait)
				}
				return err
			}
			if a.json {
				return a.printJSON(out)
			}
			if !out.Enabled {
				fmt.Fprintf(a.stdout, "%s: validity checks are off on the workers (GITFLEET_VALIDATE=on turns them on); nothing was sent\n", what)
				return nil
			}
			fmt.Fprintf(a.stdout, "%s: %s checked: %d valid, %d invalid (%d revoked now), %d unknown\n", what,
				count(int64(out.Checked), "secret", "secrets"), out.Valid, out.Invalid, out.Revoked, out.Unknown)
			xs, err := st.FleetSecrets(ctx, store.FleetFilter{ShardID: shardID, SecretHash: hash, Ignored: true,
				Validity: []string{"valid", "invalid", "unknown"}}, store.Page{Limit: 200})
			if err != nil {
				return err
			}
			for _, x := range xs {
				if x.Validity == nil || x.Subject != subject {
					continue
				}
				line := fmt.Sprintf("  %s %s  %s", x.RuleID, short(x.SecretHash), validityText(x.Validity))
				if d := x.Validity.Detail; d != "" && x.Validity.State != "valid" {
					line += "  " + textsafe.Printable(d)
				}
				if f := factsText(x.Validity.Facts); f != "" {
					line += "  " + f
				}
				fmt.Fprintln(a.stdout, line)
			}
			return nil
		},
	}
	sel.add(cmd)
	cmd.Flags().StringVar(&rule, "rule", "", "the secret's rule, when its hash prefix names secrets of several rules")
	cmd.Flags().DurationVar(&wait, "wait", 10*time.Minute, "how long to wait for the checks")
	return cmd
}
