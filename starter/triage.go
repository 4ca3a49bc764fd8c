package main

import (
	"context"
	"errors"
	"fmt"
	"os/user"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
)

// secretArgs name one secret: a repository (or scan target) and the start
// of its hash, with its rule when the same hash has several.
type secretArgs struct {
	sel  selectionFlags
	rule string
}

func (s *secretArgs) add(cmd *cobra.Command) {
	s.sel.add(cmd)
	cmd.Flags().StringVar(&s.rule, "rule", "", "the secret's rule, when its hash prefix names secrets of several rules")
}

// minPrefix is the shortest hash prefix taken: shorter ones name too many.
const minPrefix = 4

var hexDigits = "0123456789abcdef"

// found is the one secret a repository and a hash prefix name.
type found struct {
	st      *store.Store
	shard   *store.Shard
	what    string
	scopeID int64
	secret  store.SecretMatch
}

// findSecret resolves REPO HASH-PREFIX to one secret of the repository's
// newest scope; an unknown or ambiguous prefix is bad input, the
// candidates listed.
func (a *app) findSecret(ctx context.Context, args []string, s secretArgs) (*found, error) {
	prefix := strings.ToLower(args[1])
	if len(prefix) < minPrefix || strings.Trim(prefix, hexDigits) != "" {
		arg := args[1]
		if len(arg) > maxEcho {
			arg = shorten(arg)
		}
		return nil, usageError{fmt.Errorf("%s is not the start of a secret hash: %d or more hex digits, as findings prints them",
			textsafe.Printable(arg), minPrefix)}
	}
	st, err := a.store(ctx)
	if err != nil {
		return nil, err
	}
	f := &found{st: st}
	key, what, err := a.shardKeyOf(ctx, st, args[0], s.sel)
	if err != nil {
		st.Close()
		return nil, err
	}
	f.what = what
	if f.shard, err = st.ShardByKey(ctx, key); err == nil && f.shard != nil {
		f.scopeID, err = st.LatestScope(ctx, f.shard.ID)
	}
	if err != nil {
		st.Close()
		return nil, err
	}
	if f.shard == nil || f.scopeID == 0 {
		st.Close()
		return nil, usageError{fmt.Errorf("%s has not been scanned yet", what)}
	}
	const shown = 20
	ms, err := st.MatchSecrets(ctx, f.scopeID, prefix, s.rule, shown+1)
	if err != nil {
		st.Close()
		return nil, err
	}
	switch len(ms) {
	case 0:
		st.Close()
		rule := ""
		if s.rule != "" {
			rule = " of rule " + s.rule
		}
		return nil, usageError{fmt.Errorf("%s has no secret%s whose hash starts with %s (starter findings %s lists them)", what, rule, prefix, args[0])}
	case 1:
		f.secret = ms[0]
		return f, nil
	}
	st.Close()
	// The candidates on standard error, one a line; the error names the count.
	w := tabwriter.NewWriter(a.stderr, 0, 4, 2, ' ', 0)
	for _, m := range ms[:min(len(ms), shown)] {
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", m.SecretHash[:min(len(m.SecretHash), 16)], m.RuleID, location(m.Where), textsafe.Printable(m.Preview))
	}
	_ = w.Flush()
	return nil, usageError{fmt.Errorf("%s: %s secrets have a hash starting with %s (above); give more of it, or --rule", what, countUpTo(len(ms), shown), prefix)}
}

func countUpTo(n, shown int) string {
	if n > shown {
		return fmt.Sprintf("more than %d", shown)
	}
	return fmt.Sprint(n)
}

// systemActor reports whether name reads as gitfleet's own actor,
// "gitfleet (validity check)", in any case or spacing: a person may not
// sign a change as the system.
func systemActor(name string) bool {
	return strings.HasPrefix(strings.ToLower(strings.Join(strings.Fields(name), "")), "gitfleet(")
}

// actor is who --as names, else the OS user.
func actor(as string) (string, error) {
	if as != "" {
		if strings.ContainsFunc(as, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			return "", usageError{errors.New("--as: control characters")}
		}
		if systemActor(as) {
			return "", usageError{fmt.Errorf("--as %q: names like %q are gitfleet's own (its validity checks), not a person's", as, store.ValidityActor)}
		}
		return as, nil
	}
	u, err := user.Current()
	if err != nil || u.Username == "" {
		return "", usageError{errors.New("who resolves it? the OS user is unknown: give --as NAME")}
	}
	return u.Username, nil
}

func (a *app) findingsResolveCmd() *cobra.Command {
	var s secretArgs
	var reason, comment, as string
	cmd := &cobra.Command{
		Use:   "resolve REPO SECRET-HASH-PREFIX --reason " + strings.Join(store.Reasons, "|"),
		Short: "Resolve a secret: it is handled (revoked, a false positive, used in tests, won't fix)",
		Long: `resolve records that a secret of a repository is handled, with a reason — the
reasons GitHub's secret scanning uses: revoked, false_positive, used_in_tests,
wont_fix — who (--as, default the OS user), when, and a comment. The state
belongs to the secret (its rule and hash) within the repository: it holds for
every occurrence, through re-scans, renames and transfers, and rule changes.
A resolved secret found in a new commit later is listed as "seen again after
resolution". Every change is kept: 'findings show' prints the history.

REPO is a collected repository or a scan target as 'findings' takes it;
SECRET-HASH-PREFIX the start of the hash 'findings' prints (4 hex digits or
more). A prefix that names several secrets is refused, listing them.`,
		Example: `  starter findings resolve acme/api 5f0c7a1e --reason revoked --comment "rotated 2026-11-20"
  starter findings resolve ./tools 9e41 --reason used_in_tests --as alice`,
		Args: args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if !isReason(reason) {
				return usageError{fmt.Errorf("--reason %q: one of %s", reason, strings.Join(store.Reasons, ", "))}
			}
			return a.changeState(cmd.Context(), in, s, store.StateChange{State: reason, Comment: comment}, as)
		},
	}
	s.add(cmd)
	cmd.Flags().StringVar(&reason, "reason", "", "why it is resolved: "+strings.Join(store.Reasons, ", "))
	cmd.Flags().StringVar(&comment, "comment", "", "a comment kept with the change")
	cmd.Flags().StringVar(&as, "as", "", "who resolves it (default: the OS user)")
	return cmd
}

func (a *app) findingsReopenCmd() *cobra.Command {
	var s secretArgs
	var comment, as string
	cmd := &cobra.Command{
		Use:   "reopen REPO SECRET-HASH-PREFIX",
		Short: "Reopen a resolved secret",
		Long: `reopen makes a resolved secret open again, keeping its history. REPO and
SECRET-HASH-PREFIX are as for 'findings resolve'.`,
		Example: `  starter findings reopen acme/api 5f0c7a1e --comment "not rotated after all"`,
		Args:    args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, in []string) error {
			return a.changeState(cmd.Context(), in, s, store.StateChange{State: store.StateOpen, Comment: comment}, as)
		},
	}
	s.add(cmd)
	cmd.Flags().StringVar(&comment, "comment", "", "a comment kept with the change")
	cmd.Flags().StringVar(&as, "as", "", "who reopens it (default: the OS user)")
	return cmd
}

func (a *app) changeState(ctx context.Context, in []string, s secretArgs, c store.StateChange, as string) error {
	var err error
	if c.Actor, err = actor(as); err != nil {
		return err
	}
	if strings.ContainsFunc(c.Comment, func(r rune) bool { return r < ' ' && r != '\n' || r == 0x7f }) {
		return usageError{errors.New("--comment: control characters")}
	}
	f, err := a.findSecret(ctx, in, s)
	if err != nil {
		return err
	}
	defer f.st.Close()
	done, err := f.st.SetSecretState(ctx, f.shard.Key, f.scopeID, f.secret.SecretKey, c)
	if errors.Is(err, store.ErrNoChange) {
		return usageError{fmt.Errorf("%s: %s %s is open already", f.what, f.secret.RuleID, short(f.secret.SecretHash))}
	}
	if err != nil {
		return err
	}
	if a.json {
		return a.printJSON(struct {
			Repository string `json:"repository"`
			store.SecretKey
			store.StateChange
		}{f.what, f.secret.SecretKey, done})
	}
	verb := "resolved as " + done.State
	if done.State == store.StateOpen {
		verb = "reopened"
	}
	fmt.Fprintf(a.stdout, "%s: %s %s %s by %s at %s\n", f.what, f.secret.RuleID, short(f.secret.SecretHash), verb,
		textsafe.Printable(done.Actor), when(done.At))
	return nil
}

func (a *app) findingsShowCmd() *cobra.Command {
	var s secretArgs
	cmd := &cobra.Command{
		Use:   "show REPO SECRET-HASH-PREFIX",
		Short: "Show a secret: where it is, its state and every change of it",
		Long: `show prints one secret of a repository — rule, hash, preview, where first and
last seen, occurrences, status, triage state — and the history of its state,
oldest first. REPO and SECRET-HASH-PREFIX are as for 'findings resolve'.`,
		Example: `  starter findings show acme/api 5f0c7a1e`,
		Args:    args(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, in []string) error {
			ctx := cmd.Context()
			f, err := a.findSecret(ctx, in, s)
			if err != nil {
				return err
			}
			defer f.st.Close()
			xs, err := f.st.FleetSecrets(ctx, store.FleetFilter{ShardID: f.shard.ID, Rules: []string{f.secret.RuleID},
				SecretHash: f.secret.SecretHash, Ignored: true}, store.Page{})
			if err != nil {
				return err
			}
			if len(xs) != 1 {
				return fmt.Errorf("%s: the secret is gone (a scan under new rules?)", f.what)
			}
			x := xs[0]
			h, err := f.st.SecretHistory(ctx, f.shard.Key, f.secret.SecretKey)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					store.FleetSecret
					History []store.StateChange `json:"history"`
				}{x, h})
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintf(w, "repository\t%s\n", textsafe.Printable(x.Repository))
			fmt.Fprintf(w, "rule\t%s\n", x.RuleID)
			fmt.Fprintf(w, "secret hash\t%s\n", dash(x.SecretHash))
			fmt.Fprintf(w, "preview\t%s\n", withDecoded(dash(textsafe.Printable(x.Preview)), x.Decoded))
			fmt.Fprintf(w, "first seen\t%s in %s (%s)\n", location(x.Location), short(x.Commit), when(x.FirstAt))
			fmt.Fprintf(w, "last seen\t%s in %s\n", location(x.Last), short(x.Last.Commit))
			fmt.Fprintf(w, "occurrences\t%s\n", thousands(x.Occurrences))
			status := string(x.Status)
			if x.Ignored != "" {
				status += ", ignored (" + x.Ignored + ")"
			} else if x.IgnoredOccurrences > 0 {
				status += fmt.Sprintf(" (%s ignored)", count(x.IgnoredOccurrences, "occurrence", "occurrences"))
			}
			fmt.Fprintf(w, "status\t%s\n", status)
			fmt.Fprintf(w, "state\t%s\n", stateText(x.State, x.SeenAgain))
			if x.Validity != nil {
				fmt.Fprintf(w, "validity\t%s\n", strings.TrimSpace(validityText(x.Validity)+"  "+factsText(x.Validity.Facts)))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if len(h) == 0 {
				fmt.Fprintln(a.stdout, "\nnever resolved")
				return nil
			}
			fmt.Fprintln(a.stdout, "\nhistory")
			w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "  WHEN\tSTATE\tBY\tCOMMENT")
			for _, c := range h {
				fmt.Fprintf(w, "  %s\t%s\t%s\t%s\n", when(c.At), c.State, textsafe.Printable(c.Actor), dash(textsafe.Printable(c.Comment)))
			}
			return w.Flush()
		},
	}
	s.add(cmd)
	return cmd
}
