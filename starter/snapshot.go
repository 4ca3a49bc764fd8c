package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/spf13/cobra"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/activities"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/store"
	"gitfleet/workflows"
)

func (a *app) snapshotCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snapshot",
		Short: "Images that runners hold: pulled from a registry or built from a collected repository",
		Long: `A snapshot is an OCI image every ready runner keeps in its store. 'create'
pulls it once from the registry and spreads it runner to runner; 'remove'
takes it off every runner. The runner-reconcile schedule repairs stores
that drifted and retries pulls that failed for a transient reason.`,
	}
	cmd.AddCommand(a.snapshotCreateCmd(), a.snapshotListCmd(), a.snapshotShowCmd(), a.snapshotWhereCmd(), a.snapshotRemoveCmd())
	return cmd
}

func (a *app) snapshotCreateCmd() *cobra.Command {
	var image, fromRepo, base string
	var noWait bool
	cmd := &cobra.Command{
		Use:   "create NAME (--image REF | --from-repo HOST/OWNER/NAME[@COMMIT]) [--base IMAGE]",
		Short: "Put an image on every ready runner",
		Example: `  starter snapshot create base --image registry.example.com/sandbox/base:1.4
  starter snapshot create tools --from-repo github.com/acme/tools
  starter snapshot create tools-v2 --from-repo github.com/acme/tools@3f2a…(40 hex) --base registry.example.com/sandbox/base:1.4`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			snap, err := a.snapshotRequest(cmd.Context(), in[0], image, fromRepo, base)
			if err != nil {
				return err
			}
			if snap, err = a.resolveRequest(cmd.Context(), snap); err != nil {
				return err
			}
			return a.createSnapshot(cmd.Context(), snap, !noWait)
		},
	}
	cmd.Flags().StringVar(&image, "image", "", "pull this image reference (host/repository:tag or @sha256:…)")
	cmd.Flags().StringVar(&fromRepo, "from-repo", "", "build from a collected repository at its last collected commit, or @COMMIT")
	cmd.Flags().StringVar(&base, "base", "", "with --from-repo: the image to put the repository's layer on")
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the propagation and return")
	return cmd
}

// snapshotRequest checks everything a user can get wrong before anything
// is written or started.
func (a *app) snapshotRequest(ctx context.Context, snapName, image, fromRepo, base string) (snapshot.Snapshot, error) {
	if err := snapshot.ValidName(snapName); err != nil {
		return snapshot.Snapshot{}, usageError{err}
	}
	if (image == "") == (fromRepo == "") {
		return snapshot.Snapshot{}, usageError{errors.New("give exactly one of --image REF or --from-repo HOST/OWNER/NAME[@COMMIT]")}
	}
	if base != "" && fromRepo == "" {
		return snapshot.Snapshot{}, usageError{errors.New("--base goes with --from-repo")}
	}
	for _, r := range []struct{ what, ref string }{{"image", image}, {"base image", base}} {
		if r.ref == "" {
			continue
		}
		parsed, err := name.ParseReference(r.ref, name.StrictValidation)
		if err != nil {
			return snapshot.Snapshot{}, usageError{fmt.Errorf("image reference %q: %v (want host/repository:tag or host/repository@sha256:…)", r.ref, err)}
		}
		// Runners pull with their own credentials and serve what they
		// pulled: only from the registries the operator allows (they check
		// again, with their own setting).
		if err := a.cfg.SnapshotSources.Check(r.what, parsed.Context().RegistryStr(), parsed.Context().RepositoryStr()); err != nil {
			return snapshot.Snapshot{}, usageError{err}
		}
	}
	if image != "" {
		return snapshot.Snapshot{Name: snapName, Kind: snapshot.KindImage, ImageRef: image}, nil
	}
	repoArg, commit, _ := strings.Cut(fromRepo, "@")
	repo, err := a.cfg.Hosts.Parse(repoArg)
	if err != nil {
		return snapshot.Snapshot{}, usageError{err}
	}
	if commit != "" && !isCommit(commit) {
		return snapshot.Snapshot{}, usageError{fmt.Errorf("%q is not a commit id: give the full 40-character SHA", commit)}
	}
	st, err := a.store(ctx)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	defer st.Close()
	cb, err := st.FindCodebase(ctx, repo)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	switch {
	case cb == nil:
		return snapshot.Snapshot{}, usageError{fmt.Errorf("%s has not been collected: run 'starter collect %s' first", repo, repo)}
	case cb.StaleSince != nil:
		return snapshot.Snapshot{}, usageError{fmt.Errorf("%s no longer exists (since %s): nothing to build from", repo, when(*cb.StaleSince))}
	case cb.LastCommitSHA == "":
		return snapshot.Snapshot{}, usageError{fmt.Errorf("%s has no collected commit yet (empty repository, or its collection has not finished)", repo)}
	}
	if commit == "" {
		commit = cb.LastCommitSHA
	}
	return snapshot.Snapshot{Name: snapName, Kind: snapshot.KindRepo, Repo: cb.Repo().String(), CodebaseID: cb.ID,
		ExternalID: cb.ExternalID, Commit: strings.ToLower(commit), BaseImage: base}, nil
}

// resolveRequest asks the registries, once, for the images a request
// names: one that does not exist is refused here (exit 2), not tried on
// every runner in turn. An image snapshot already holding the image the
// reference resolves to (asked for by tag, now by digest) is that
// snapshot: the request joins it under the reference it was created with.
func (a *app) resolveRequest(ctx context.Context, snap snapshot.Snapshot) (snapshot.Snapshot, error) {
	ref := snap.ImageRef
	if snap.Kind == snapshot.KindRepo {
		ref = snap.BaseImage
	}
	if ref == "" {
		return snap, nil
	}
	digest, err := a.resolveImage(ctx, ref)
	if errors.Is(err, errNoSuchImage) {
		return snapshot.Snapshot{}, usageError{fmt.Errorf("image %s does not exist in its registry", textsafe.Printable(ref))}
	}
	if err != nil || snap.Kind != snapshot.KindImage || digest == "" {
		return snap, err
	}
	st, err := a.store(ctx)
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	defer st.Close()
	have, err := st.Snapshot(ctx, snap.Name)
	if errors.Is(err, store.ErrNotFound) {
		return snap, nil
	}
	if err != nil {
		return snapshot.Snapshot{}, err
	}
	if have.ImageRef != snap.ImageRef && have.HoldsImage(snap.ImageRef, digest) {
		fmt.Fprintf(a.stderr, "Snapshot %s holds that image (%s) as %s\n", snap.Name, shortDigest(digest), textsafe.Printable(have.ImageRef))
		snap.ImageRef = have.ImageRef
	}
	return snap, nil
}

func isCommit(s string) bool {
	if len(s) != 40 {
		return false
	}
	for _, c := range strings.ToLower(s) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// createSnapshot records the snapshot (joining an identical request) and
// starts or wakes its propagation; with wait, it follows it to the end.
func (a *app) createSnapshot(ctx context.Context, snap snapshot.Snapshot, wait bool) error {
	st, err := a.store(ctx)
	if err != nil {
		return err
	}
	defer st.Close()
	got, existed, err := st.CreateSnapshot(ctx, snap, time.Now().UTC())
	if errors.Is(err, store.ErrSnapshotExists) {
		return usageError{err}
	}
	if err != nil {
		return err
	}
	if existed && got.State == snapshot.Removing {
		return usageError{fmt.Errorf("snapshot %s is being removed; create it again when 'starter snapshot list' no longer shows it", snap.Name)}
	}
	if existed {
		// Asking again retries the runners where it failed, even for a
		// reason the reconcile does not retry (a quota since raised).
		n, err := st.RetrySnapshotRows(ctx, snap.Name, time.Now().UTC())
		if err != nil {
			return err
		}
		if n > 0 {
			fmt.Fprintf(a.stderr, "Retrying on %s where it failed\n", plural(n, "runner", "runners"))
		}
	}
	c, err := a.temporal(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	in := activities.WorkflowSettings(a.cfg).Propagation()
	in.Name = snap.Name
	run, err := workflows.StartPropagation(ctx, c, in)
	if err != nil {
		return fmt.Errorf("start the propagation of %s: %w", snap.Name, err)
	}
	verb := "Creating"
	if existed {
		verb = "Joining the creation of"
	}
	fmt.Fprintf(a.stderr, "%s snapshot %s (%s)\n  workflow  %s\n  web ui    %s\n", verb, snap.Name, source(got), run.GetID(), a.uiLink(run.GetID(), run.GetRunID()))
	if !wait {
		return nil
	}
	fmt.Fprintf(a.stderr, "Following it until every runner has it (Ctrl-C stops following, the propagation goes on: 'starter snapshot show %s'; --no-wait does not follow)\n", snap.Name)
	done := make(chan struct{})
	silent := make(chan []string, 1)
	go a.followProgress(ctx, st, snap.Name, done, silent)
	var res workflows.PropagateSnapshotResult
	result := make(chan error, 1)
	go func() { result <- run.Get(ctx, &res) }()
	var waiting []string
	select {
	case err = <-result:
	case waiting = <-silent:
	}
	close(done)
	if err != nil {
		msg, _ := failure(err)
		return errors.New(textsafe.Printable(msg))
	}
	if waiting != nil {
		return a.leftToSilentRunners(ctx, st, snap.Name, waiting)
	}
	final, err := st.Snapshot(ctx, snap.Name)
	if err != nil {
		return err
	}
	rows, err := st.SnapshotRunners(ctx, snap.Name)
	if err != nil {
		return err
	}
	ready := 0
	for _, r := range rows {
		if r.State == snapshot.RowReady {
			ready++
		}
	}
	if a.json {
		return a.printJSON(map[string]any{"snapshot": final, "runners": rows, "result": res})
	}
	fmt.Fprintf(a.stdout, "Snapshot %s is %s on %d of %s\n", snap.Name, final.State, ready, plural(len(rows), "runner", "runners"))
	if final.Digest != "" {
		fmt.Fprintf(a.stdout, "  image     %s\n", textsafe.Printable(final.PullRef()))
	}
	fmt.Fprintf(a.stdout, "  fetched   %s from the registry, %s from peers\n", bytesHuman(res.FromRegistry), bytesHuman(res.FromPeers))
	a.printPassedOver(ctx, st, rows)
	if res.Failed > 0 || final.State != snapshot.Active {
		fmt.Fprintf(a.stdout, "  see       starter snapshot show %s\n", snap.Name)
	}
	if final.State != snapshot.Active {
		return fmt.Errorf("snapshot %s is on no runner: %s", snap.Name, textsafe.Printable(res.Reason))
	}
	return nil
}

// leftToSilentRunners ends the wait for a propagation whose pulls left
// are all on runners that stopped heartbeating: the propagation waits for
// them up to its queue bound (then 'runner offline', and the reconcile
// retries once they are back); the starter need not.
func (a *app) leftToSilentRunners(ctx context.Context, st *store.Store, snapName string, waiting []string) error {
	final, err := st.Snapshot(ctx, snapName)
	if err != nil {
		return err
	}
	rows, err := st.SnapshotRunners(ctx, snapName)
	if err != nil {
		return err
	}
	ready := 0
	for _, r := range rows {
		if r.State == snapshot.RowReady {
			ready++
		}
	}
	if a.json {
		return a.printJSON(map[string]any{"snapshot": final, "runners": rows, "waitingForSilent": waiting})
	}
	fmt.Fprintf(a.stdout, "Snapshot %s is %s on %d of %s\n", snapName, final.State, ready, plural(len(rows), "runner", "runners"))
	fmt.Fprintf(a.stdout, "  waiting   for %s, which sent no heartbeat for %s or more: stopped?\n", strings.Join(waiting, ", "), span(a.runnerSilentAfter()))
	fmt.Fprintf(a.stdout, "            its pull ends 'runner offline' within %s and the reconcile retries it once the runner is back\n",
		span(cmp.Or(a.cfg.PullQueue, 2*time.Minute)))
	a.printPassedOver(ctx, st, rows)
	fmt.Fprintf(a.stdout, "  see       starter snapshot show %s; starter runner list\n", snapName)
	if final.State != snapshot.Active {
		return fmt.Errorf("snapshot %s is on no runner yet: the runners it waits for are silent (%s)", snapName, strings.Join(waiting, ", "))
	}
	return nil
}

// printPassedOver names the runners the propagation sent nothing to
// because they had stopped heartbeating (ready by their row, silent by
// the database's clock), so that "on 9 of 9" does not hide a tenth.
func (a *app) printPassedOver(ctx context.Context, st *store.Store, rows []snapshot.Row) {
	runners, err := st.RunnerStatuses(ctx)
	if err != nil {
		return
	}
	has := map[string]bool{}
	for _, r := range rows {
		has[r.RunnerID] = true
	}
	slices.SortFunc(runners, func(x, y store.RunnerStatus) int { return naturalCompare(x.ID, y.ID) })
	var silent []string
	for _, r := range runners {
		if !has[r.ID] && r.State == snapshot.RunnerReady && r.Silent > a.runnerSilentAfter() {
			silent = append(silent, fmt.Sprintf("%s (no heartbeat for %s)", textsafe.Printable(r.ID), span(r.Silent)))
		}
	}
	if len(silent) > 0 {
		fmt.Fprintf(a.stdout, "  not on    %s: stopped? the reconcile puts it there once back\n", strings.Join(silent, ", "))
	}
}

// followProgress prints a line a second while a propagation runs, naming
// the runners it waits for that have stopped heartbeating (by the
// database's clock). When every pull left is on such a runner, it sends
// their ids on silent: nothing will move until they are back or the
// propagation gives them up.
func (a *app) followProgress(ctx context.Context, st *store.Store, snapName string, done <-chan struct{}, silent chan<- []string) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := ""
	for {
		select {
		case <-done:
			return
		case <-ctx.Done():
			return
		case <-t.C:
		}
		rows, err := st.SnapshotRunners(ctx, snapName)
		if err != nil {
			continue
		}
		var done, total int64
		counts := map[snapshot.RowState]int{}
		for _, r := range rows {
			counts[r.State]++
			done, total = done+r.BytesDone, total+r.BytesTotal
		}
		line := fmt.Sprintf("  %d ready, %d pulling, %d building, %d error; %s of %s", counts[snapshot.RowReady], counts[snapshot.RowPulling],
			counts[snapshot.RowBuilding], counts[snapshot.RowError], bytesHuman(done), bytesHuman(total))
		stopped, inFlight := a.silentInFlight(ctx, st, rows)
		if len(stopped) > 0 {
			line += fmt.Sprintf("; waiting for %s (no heartbeat for %s or more)", strings.Join(stopped, ", "), span(a.runnerSilentAfter()))
		}
		if line != last {
			fmt.Fprintln(a.stderr, line)
			last = line
		}
		if inFlight > 0 && len(stopped) == inFlight {
			silent <- stopped
			return
		}
	}
}

// silentInFlight lists the runners, naturally sorted, of the rows in
// flight whose heartbeat is older than a few intervals, and counts the
// rows in flight.
func (a *app) silentInFlight(ctx context.Context, st *store.Store, rows []snapshot.Row) (silent []string, inFlight int) {
	runners, err := st.RunnerStatuses(ctx)
	if err != nil {
		return nil, 0
	}
	age := map[string]time.Duration{}
	for _, r := range runners {
		age[r.ID] = r.Silent
	}
	for _, r := range rows {
		if !r.State.InFlight() {
			continue
		}
		inFlight++
		if age[r.RunnerID] > a.runnerSilentAfter() {
			silent = append(silent, textsafe.Printable(r.RunnerID))
		}
	}
	slices.SortFunc(silent, naturalCompare)
	return silent, inFlight
}

// source says where a snapshot comes from, escaped for a terminal.
func source(s snapshot.Snapshot) string {
	if s.Kind == snapshot.KindRepo {
		src := "built from " + s.Repo + "@" + short(s.Commit)
		if s.BaseImage != "" {
			src += " on " + s.BaseImage
		}
		return textsafe.Printable(src)
	}
	return textsafe.Printable("image " + s.ImageRef)
}

func (a *app) snapshotListCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "list",
		Short:   "Every snapshot with its state and how many runners hold it",
		Example: `  starter snapshot list`,
		Args:    args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			snaps, err := st.Snapshots(cmd.Context())
			if err != nil {
				return err
			}
			type item struct {
				snapshot.Snapshot
				Ready   int `json:"readyRunners"`
				Runners int `json:"runners"`
			}
			items := make([]item, len(snaps))
			for i, s := range snaps {
				rows, err := st.SnapshotRunners(cmd.Context(), s.Name)
				if err != nil {
					return err
				}
				items[i] = item{Snapshot: s, Runners: len(rows)}
				for _, r := range rows {
					if r.State == snapshot.RowReady {
						items[i].Ready++
					}
				}
			}
			if a.json {
				return a.printJSON(items)
			}
			if len(items) == 0 {
				fmt.Fprintln(a.stdout, "No snapshots. Create one with 'starter snapshot create NAME --image REF'.")
				return nil
			}
			w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "NAME\tSTATE\tREADY\tDIGEST\tSOURCE")
			for _, it := range items {
				fmt.Fprintf(w, "%s\t%s\t%d/%d\t%s\t%s\n", it.Name, it.State, it.Ready, it.Runners, dash(shortDigest(it.Digest)), source(it.Snapshot))
			}
			return w.Flush()
		},
	}
}

func (a *app) snapshotShowCmd() *cobra.Command {
	var watch bool
	cmd := &cobra.Command{
		Use:   "show NAME [--watch]",
		Short: "A snapshot and its state on each runner",
		Example: `  starter snapshot show base
  starter snapshot show base --watch`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if err := snapshot.ValidName(in[0]); err != nil {
				return usageError{err}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			t := time.NewTicker(time.Second)
			defer t.Stop()
			for shown := false; ; shown = true {
				snap, err := st.Snapshot(cmd.Context(), in[0])
				if errors.Is(err, store.ErrNotFound) && shown {
					// Watched to the end of its removal.
					fmt.Fprintf(a.stdout, "Snapshot %s was removed\n", in[0])
					return nil
				}
				if errors.Is(err, store.ErrNotFound) {
					return usageError{err}
				}
				if err != nil {
					return err
				}
				rows, err := st.SnapshotRunners(cmd.Context(), in[0])
				if err != nil {
					return err
				}
				if a.json {
					if err := a.printJSON(map[string]any{"snapshot": snap, "runners": rows}); err != nil {
						return err
					}
				} else if err := a.printSnapshot(snap, rows); err != nil {
					return err
				}
				if !watch || settled(snap, rows) {
					return nil
				}
				select {
				case <-cmd.Context().Done():
					return nil
				case <-t.C:
				}
				fmt.Fprintln(a.stdout)
			}
		},
	}
	cmd.Flags().BoolVar(&watch, "watch", false, "refresh every second until no runner is pulling, building or removing")
	return cmd
}

// settled reports that nothing is moving: no row in flight or removing.
func settled(s snapshot.Snapshot, rows []snapshot.Row) bool {
	for _, r := range rows {
		if r.State.InFlight() || r.State == snapshot.RowRemoving {
			return false
		}
	}
	return s.State == snapshot.Active || s.State == snapshot.Error
}

func (a *app) printSnapshot(s snapshot.Snapshot, rows []snapshot.Row) error {
	fmt.Fprintf(a.stdout, "Snapshot %s: %s\n", s.Name, s.State)
	fmt.Fprintf(a.stdout, "  source    %s\n", source(s))
	if s.Digest != "" {
		fmt.Fprintf(a.stdout, "  image     %s\n", textsafe.Printable(s.PullRef()))
	}
	if s.ErrorReason != "" {
		// Reasons carry what registries and peers answered.
		fmt.Fprintf(a.stdout, "  reason    %s\n", textsafe.Printable(s.ErrorReason))
	}
	fmt.Fprintf(a.stdout, "  created   %s\n", when(s.CreatedAt))
	if len(rows) == 0 {
		fmt.Fprintln(a.stdout, "  on no runner")
		return nil
	}
	w := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RUNNER\tSTATE\tPROGRESS\tSOURCE\tSINCE\tREASON\tRETRY")
	rows = slices.Clone(rows)
	slices.SortFunc(rows, func(x, y snapshot.Row) int { return naturalCompare(x.RunnerID, y.RunnerID) })
	for _, r := range rows {
		progress := "-"
		if r.BytesTotal > 0 {
			progress = fmt.Sprintf("%s / %s (%d%%)", bytesHuman(r.BytesDone), bytesHuman(r.BytesTotal), r.BytesDone*100/r.BytesTotal)
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", textsafe.Printable(r.RunnerID), textsafe.Printable(string(r.State)), progress,
			dash(textsafe.Printable(r.Source)), ago(r.UpdatedAt), dash(textsafe.Printable(r.ErrorReason)), a.retryNote(r, s.Name))
	}
	return w.Flush()
}

// retryNote says when the reconcile retries a row in error: a reconcile
// run before the row's backoff ends leaves it alone, which 'snapshot show'
// is where to learn.
func (a *app) retryNote(r snapshot.Row, snapName string) string {
	if r.State != snapshot.RowError {
		return "-"
	}
	due, ok := snapshot.NextRetry(r, snapshot.DefaultRetryBase)
	if !ok {
		return "not retried by the reconcile ('snapshot create " + snapName + "' again retries it)"
	}
	every := cmp.Or(a.cfg.ReconcileEvery, 5*time.Minute)
	if wait := time.Until(due).Round(time.Second); wait > 0 {
		return fmt.Sprintf("due in %s, at the first reconcile after %s (every %s)", span(wait), due.UTC().Format("15:04:05 UTC"), span(every))
	}
	return fmt.Sprintf("due now, at the next reconcile (every %s)", span(every))
}

func (a *app) snapshotWhereCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "where NAME",
		Short: "The runners that hold a snapshot ready (where work using it can run)",
		Example: `  starter snapshot where base
  starter snapshot where base --json`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			if err := snapshot.ValidName(in[0]); err != nil {
				return usageError{err}
			}
			st, err := a.store(cmd.Context())
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.Snapshot(cmd.Context(), in[0]); errors.Is(err, store.ErrNotFound) {
				return usageError{err}
			} else if err != nil {
				return err
			}
			runners, err := st.ReadyRunners(cmd.Context(), in[0])
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(runners)
			}
			for _, r := range runners {
				fmt.Fprintf(a.stdout, "%s\t%s\n", textsafe.Printable(r.ID), textsafe.Printable(r.PeerAddr))
			}
			if len(runners) == 0 {
				fmt.Fprintf(a.stderr, "No runner holds %s ready.\n", in[0])
			}
			return nil
		},
	}
}

func (a *app) snapshotRemoveCmd() *cobra.Command {
	var noWait bool
	cmd := &cobra.Command{
		Use:     "remove NAME",
		Short:   "Take a snapshot off every runner and delete it",
		Example: `  starter snapshot remove base`,
		Args:    args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, in []string) error {
			ctx := cmd.Context()
			if err := snapshot.ValidName(in[0]); err != nil {
				return usageError{err}
			}
			st, err := a.store(ctx)
			if err != nil {
				return err
			}
			defer st.Close()
			if _, err := st.Snapshot(ctx, in[0]); errors.Is(err, store.ErrNotFound) {
				return usageError{err}
			} else if err != nil {
				return err
			}
			c, err := a.temporal(ctx)
			if err != nil {
				return err
			}
			defer c.Close()
			// A propagation still running would put the image back.
			var notFound *serviceerror.NotFound
			if err := c.CancelWorkflow(ctx, workflows.PropagateSnapshotWorkflowID(in[0]), ""); err != nil && !errors.As(err, &notFound) {
				return fmt.Errorf("stop the propagation of %s: %w", in[0], err)
			}
			run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
				ID:                       workflows.RemoveSnapshotWorkflowID(in[0]),
				TaskQueue:                workflows.TaskQueue,
				WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
				TypedSearchAttributes:    temporal.NewSearchAttributes(workflows.SASnapshot.ValueSet(in[0])),
				Memo:                     map[string]any{"snapshot": in[0]},
			}, workflows.RemoveSnapshot, workflows.RemoveSnapshotInput{Name: in[0], Queue: a.cfg.PullQueue})
			if err != nil {
				return fmt.Errorf("start the removal of %s: %w", in[0], err)
			}
			fmt.Fprintf(a.stderr, "Removing snapshot %s\n  workflow  %s\n  web ui    %s\n", in[0], run.GetID(), a.uiLink(run.GetID(), run.GetRunID()))
			if noWait {
				return nil
			}
			var res workflows.RemoveSnapshotResult
			if err := run.Get(ctx, &res); err != nil {
				msg, _ := failure(err)
				return errors.New(msg)
			}
			if a.json {
				return a.printJSON(res)
			}
			if res.Deleted {
				fmt.Fprintf(a.stdout, "Removed snapshot %s from %s\n", in[0], plural(res.Removed, "runner", "runners"))
				return nil
			}
			fmt.Fprintf(a.stdout, "Removed snapshot %s from %s; %s did not answer (%s): the reconcile finishes the removal when they are back\n",
				in[0], plural(res.Removed, "runner", "runners"), plural(len(res.Waiting), "runner", "runners"), strings.Join(res.Waiting, ", "))
			return nil
		},
	}
	cmd.Flags().BoolVar(&noWait, "no-wait", false, "start the removal and return")
	return cmd
}

func shortDigest(d string) string {
	if len(d) > len("sha256:")+12 {
		return d[:len("sha256:")+12]
	}
	return d
}

// ago says how long ago t was, in the largest whole unit.
func ago(t time.Time) string {
	d := time.Since(t).Round(time.Second)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
