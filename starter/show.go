package main

import (
	"fmt"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"gitfleet/internal/domain/decay"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

func (a *app) showCmd() *cobra.Command {
	var limit int
	cmd := &cobra.Command{
		Use:   "show <host/owner/name | owner/name>",
		Short: "Show a repository's identity, status and collection history",
		Long: `Show prints what gitfleet knows about a repository: its codebase (the
identity that follows renames and transfers), whether the repository still
exists — or can no longer be read (inaccessible: made private, or deleted
without a token that could tell; kept, never deleted automatically) — its
last collected commit, and its collection history.

Showing counts as a view: repositories people look at are re-collected more often.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			r, err := a.cfg.Hosts.Parse(in[0])
			if err != nil {
				return err
			}
			if limit < 1 {
				return usageError{fmt.Errorf("--limit must be at least 1")}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			cb, err := st.FindCodebase(cmd.Context(), r)
			if err != nil {
				return err
			}
			// A name the codebase had before a rename or transfer finds it too.
			asked := ""
			if cb == nil {
				if cb, err = st.CodebaseByFormerName(cmd.Context(), r); err != nil {
					return err
				}
				asked = r.String()
			}
			if cb == nil {
				return usageError{fmt.Errorf("%s has not been collected (try: starter collect %s)", r, r)}
			}
			former, err := st.FormerNames(cmd.Context(), cb.ID)
			if err != nil {
				return err
			}
			history, err := st.Collections(cmd.Context(), cb.ID, limit)
			if err != nil {
				return err
			}
			upload, err := st.LatestUpload(cmd.Context(), cb.ID)
			if err != nil {
				return err
			}
			if err := st.RecordView(cmd.Context(), cb.ID, time.Now()); err != nil {
				return err
			}
			if a.json {
				return a.printJSON(struct {
					Codebase *store.Codebase `json:"codebase"`
					Status   string          `json:"status"`
					// RenamedFrom is the name asked for when the codebase holds another now.
					RenamedFrom string             `json:"renamedFrom,omitempty"`
					FormerNames []repoid.ID        `json:"formerNames,omitempty"`
					History     []store.Collection `json:"history"`
					// CodeScanning is the newest upload to GitHub code scanning.
					CodeScanning *store.CodeScanningUpload `json:"codeScanning,omitempty"`
				}{cb, status(cb), asked, former, history, upload})
			}
			if asked != "" {
				fmt.Fprintf(a.stdout, "%s was renamed or transferred: it is now %s\n\n", asked, cb.Repo())
			}
			a.printShow(cb, former, history, upload)
			return nil
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 20, "how many history entries to show")
	return cmd
}

func status(cb *store.Codebase) string {
	switch {
	case cb.StaleSince != nil:
		return "repository no longer exists"
	case cb.InaccessibleSince != nil:
		return "inaccessible"
	}
	return "live"
}

func (a *app) printShow(cb *store.Codebase, former []repoid.ID, history []store.Collection, upload *store.CodeScanningUpload) {
	fmt.Fprintf(a.stdout, "%s  (codebase %d, repository id %s)\n", cb.Repo(), cb.ID, cb.ExternalID)
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	switch {
	case cb.StaleSince != nil:
		deleted := cb.StaleSince.Add(workflows.StaleRetention)
		fmt.Fprintf(w, "  status\trepository no longer exists (stale since %s; deleted after %s)\n", when(*cb.StaleSince), when(deleted))
	case cb.InaccessibleSince != nil:
		// Often hidden exactly when it leaked: its findings stay.
		fmt.Fprintf(w, "  status\tinaccessible since %s: gitfleet can no longer read it (made private, or deleted and\n"+
			"\tthe API cannot tell which); kept with its findings, never deleted automatically\n", when(*cb.InaccessibleSince))
	default:
		fmt.Fprintf(w, "  status\tlive\n")
	}
	if len(former) > 0 {
		names := make([]string, len(former))
		for i, f := range former {
			names[i] = f.String()
		}
		fmt.Fprintf(w, "  formerly\t%s\n", strings.Join(names, ", "))
	}
	if cb.DefaultBranch != "" {
		fmt.Fprintf(w, "  default branch\t%s\n", cb.DefaultBranch)
	}
	if cb.LastCommitSHA != "" {
		fmt.Fprintf(w, "  last commit\t%s\n", cb.LastCommitSHA)
	}
	if cb.LastCompletedAt != nil {
		fmt.Fprintf(w, "  last collected\t%s\n", when(*cb.LastCompletedAt))
	} else {
		fmt.Fprintf(w, "  last collected\tnever completed\n")
	}
	if cb.ConsecutiveFailures >= decay.MaxFailures {
		fmt.Fprintf(w, "  failures\t%d in a row: no longer refreshed (starter collect %s brings it back)\n",
			cb.ConsecutiveFailures, cb.Repo())
	} else if cb.ConsecutiveFailures > 0 {
		fmt.Fprintf(w, "  failures\t%d in a row\n", cb.ConsecutiveFailures)
	}
	if upload != nil {
		fmt.Fprintf(w, "  code scanning\t%s\n", codeScanningText(upload))
	}
	w.Flush()
	if len(history) == 0 {
		return
	}
	fmt.Fprintln(a.stdout, "\nHistory (newest first):")
	w = tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  STARTED\tSTATUS\tCASE\tCOMMIT\tAS\tDETAIL")
	for _, c := range history {
		detail := c.ErrorMessage
		if detail == "" && c.Case != "" {
			detail = c.Case.Describe()
		}
		fmt.Fprintf(w, "  %s\t%s\t%s\t%s\t%s\t%s\n", c.StartedAt.UTC().Format("2006-01-02 15:04:05"), c.Status,
			dash(string(c.Case)), dash(short(c.CommitSHA)), c.Repo, detail)
	}
	w.Flush()
}

// codeScanningText says where the repository's newest upload to GitHub
// code scanning stands.
func codeScanningText(u *store.CodeScanningUpload) string {
	results := fmt.Sprintf("%d open, %d dismissed", u.Open, u.Dismissed)
	at := fmt.Sprintf("%s at %s", strings.TrimPrefix(u.Ref, "refs/heads/"), short(u.Commit))
	switch u.State {
	case store.UploadNotSent:
		return fmt.Sprintf("not sent — %s (%s)", u.Message, when(u.CreatedAt))
	case store.UploadPending:
		return fmt.Sprintf("upload %s of %s sent %s, not processed yet (%s)", u.SarifID, at, when(u.CreatedAt), results)
	case store.UploadComplete:
		return fmt.Sprintf("uploaded %s for %s: %s (upload %s)", when(u.CreatedAt), at, results, u.SarifID)
	case store.UploadFailed:
		return fmt.Sprintf("GitHub could not process the upload of %s for %s (attempt %d): %s", when(u.CreatedAt), at, u.Attempt, u.Message)
	}
	return u.State
}

func when(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") }

func short(sha string) string {
	if len(sha) > 12 {
		return sha[:12]
	}
	return sha
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
