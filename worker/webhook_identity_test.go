package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/gittest"
	"gitfleet/internal/domain/identity"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/config"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// identityOutcome is what a case leaves of a codebase, with the side's
// owner prefix taken off, so the event-driven and the poll-driven sides
// compare.
type identityOutcome struct {
	Case         identity.Case
	Failed       string // the collection's error type, if it failed
	SameCodebase bool   // the repository's codebase is the one collected before
	Owner, Name  string
	Stale        bool
	Inaccessible bool
	Findings     int
}

// Each identity event, delivered by the forge's App to a real worker,
// leaves the repository's codebase as the poll-driven collection that
// discovers the same change without any event does (issue 32: "the next
// collection must agree"): case, codebase, name, stale or inaccessible,
// findings. One worker, one forge, every case at once.
func TestIdentityEventsAgreeWithPolling(t *testing.T) {
	ctx := context.Background()
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { fg.Close() })
	// reader is the worker's App: it reads what it is installed on.
	// observer is another App of the same webhook that the worker cannot
	// use: its events arrive, its repositories stay unreadable to gitfleet.
	reader, err := fg.CreateApp("gitfleet")
	if err != nil {
		t.Fatal(err)
	}
	observer, err := fg.CreateApp("observer")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(t.TempDir(), "app.pem")
	if err := os.WriteFile(keyFile, reader.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}

	type change func(t *testing.T, owner, name string, inst int64) (newOwner, newName string)
	same := func(f func(owner, name string) error) change {
		return func(t *testing.T, owner, name string, _ int64) (string, string) {
			if err := f(owner, name); err != nil {
				t.Fatal(err)
			}
			return owner, name
		}
	}
	cases := []struct {
		name    string
		app     forge.App
		private bool // before the change
		// selected: the App is installed on the repository and a
		// second one only (installation_repositories can remove it).
		selected bool
		// account: the event is about the whole installation, and reaches
		// the repository through its account's re-collection.
		account bool
		change  change
	}{
		{name: "renamed", app: reader, change: func(t *testing.T, owner, name string, _ int64) (string, string) {
			if err := fg.Rename(owner, name, name+"-new"); err != nil {
				t.Fatal(err)
			}
			return owner, name + "-new"
		}},
		{name: "transferred", app: reader, change: func(t *testing.T, owner, name string, _ int64) (string, string) {
			if err := fg.CreateOrg(owner + "-to"); err != nil {
				t.Fatal(err)
			}
			if err := fg.Transfer(owner, name, owner+"-to"); err != nil {
				t.Fatal(err)
			}
			return owner + "-to", name
		}},
		{name: "deleted", app: reader, change: same(fg.Delete)},
		{name: "privatized-readable", app: reader, change: same(func(o, n string) error { return fg.SetPrivate(o, n, true) })},
		{name: "privatized-unreadable", app: observer, change: same(func(o, n string) error { return fg.SetPrivate(o, n, true) })},
		{name: "publicized", app: reader, private: true, change: same(func(o, n string) error { return fg.SetPrivate(o, n, false) })},
		{name: "archived", app: reader, change: same(func(o, n string) error { return fg.SetArchived(o, n, true) })},
		{name: "selection-removed", app: reader, private: true, selected: true, change: func(t *testing.T, owner, name string, inst int64) (string, string) {
			if err := fg.SetInstallationRepos(inst, "keep"); err != nil {
				t.Fatal(err)
			}
			return owner, name
		}},
		{name: "installation-deleted", app: reader, private: true, account: true, change: func(t *testing.T, owner, name string, inst int64) (string, string) {
			if err := fg.Uninstall(inst); err != nil {
				t.Fatal(err)
			}
			return owner, name
		}},
		{name: "installation-suspended", app: reader, private: true, account: true, change: func(t *testing.T, owner, name string, inst int64) (string, string) {
			if err := fg.SuspendInstallation(inst, true); err != nil {
				t.Fatal(err)
			}
			return owner, name
		}},
	}
	const repoName = "r"
	type side struct {
		owner, newOwner, newName string
		inst                     int64
		externalID               string
		codebaseID               int64
		run                      client.WorkflowRun
	}
	sides := make([][2]*side, len(cases)) // [event, poll]
	for i, tc := range cases {
		for s, prefix := range []string{"ev-", "po-"} {
			sd := &side{owner: prefix + tc.name}
			sides[i][s] = sd
			if err := fg.CreateOrg(sd.owner); err != nil {
				t.Fatal(err)
			}
			r, err := fg.CreateRepo(sd.owner, repoName)
			if err != nil {
				t.Fatal(err)
			}
			sd.externalID = strconv.FormatInt(r.ID, 10)
			if _, err := fg.Commit(sd.owner, repoName, "main", map[string]string{
				"ci.env": "GITHUB_TOKEN=" + gittest.FakePAT(fmt.Sprintf("Id%02d%d", i, s)) + "\n"}, "first"); err != nil {
				t.Fatal(err)
			}
			var granted []string
			if tc.selected {
				if _, err := fg.CreateRepo(sd.owner, "keep"); err != nil {
					t.Fatal(err)
				}
				granted = []string{repoName, "keep"}
			}
			in, err := fg.InstallApp(tc.app.ID, sd.owner, granted...)
			if err != nil {
				t.Fatal(err)
			}
			sd.inst = in.ID
			if tc.private {
				if err := fg.SetPrivate(sd.owner, repoName, true); err != nil {
					t.Fatal(err)
				}
			}
		}
	}

	const id = "webhook-identity"
	t.Cleanup(func() { forgetWorkers(t, id) })
	addr := freePort(t)
	startWorker(t, config.EnvWorkerID+"="+id, vcs.EnvAPIURL+"="+fg.APIURL(),
		vcs.EnvAppID+"="+strconv.FormatInt(reader.ID, 10), vcs.EnvAppKeyFile+"="+keyFile,
		config.EnvWebhookAddr+"="+addr, config.EnvWebhookSecret+"="+webhookSecret).waitLine(t, `"webhookAddr"`)

	wait := func(run client.WorkflowRun) (workflows.CollectResult, error) {
		ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
		defer cancel()
		var res workflows.CollectResult
		err := run.Get(ctx, &res)
		return res, err
	}
	collect := func(repo repoid.ID, trigger string) client.WorkflowRun {
		t.Helper()
		run, err := env.Client.ExecuteWorkflow(ctx, workflows.CollectOptions(repo), workflows.Collect,
			workflows.CollectInput{Repo: repo, Trigger: trigger})
		if err != nil {
			t.Fatal(err)
		}
		return run
	}
	// Every repository collected once, before any change.
	for i := range cases {
		for _, sd := range sides[i] {
			sd.run = collect(repoid.ID{Host: fg.Host(), Owner: sd.owner, Name: repoName}, workflows.TriggerManual)
		}
	}
	for i, tc := range cases {
		for _, sd := range sides[i] {
			res, err := wait(sd.run)
			if err != nil || res.Scan == nil || res.Scan.Receipt == nil || res.Scan.Receipt.Findings != 1 {
				t.Fatalf("%s: first collection of %s: %+v, %v", tc.name, sd.owner, res, err)
			}
			sd.codebaseID = res.CodebaseID
		}
	}

	// The event side: the webhook on, each change delivered to the worker,
	// which hands the repository to its collection.
	for _, app := range []forge.App{reader, observer} {
		if err := fg.SetAppWebhook(app.ID, "http://"+addr+"/webhook", webhookSecret); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range cases {
		sd := sides[i][0]
		sd.newOwner, sd.newName = tc.change(t, sd.owner, repoName, sd.inst)
	}
	if err := fg.WaitHooks(ctx); err != nil {
		t.Fatal(err)
	}
	for _, d := range fg.HookDeliveries() {
		if !d.OK() {
			t.Errorf("delivery %s %s (installation %d, repository %d) answered %s", d.Event, d.Action, d.InstallationID, d.RepositoryID, d.Status)
		}
	}
	// The poll side: no webhook; the collection the sweep would start, of
	// the name gitfleet knows, discovers the change.
	for _, app := range []forge.App{reader, observer} {
		if err := fg.SetAppWebhook(app.ID, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	for i, tc := range cases {
		sd := sides[i][1]
		sd.newOwner, sd.newName = tc.change(t, sd.owner, repoName, sd.inst)
		sd.run = collect(repoid.ID{Host: fg.Host(), Owner: sd.owner, Name: repoName}, workflows.TriggerSweep)
	}
	for i, tc := range cases {
		ev := sides[i][0]
		if tc.account {
			// The account's re-collection starts the Collect: once it is
			// done, the Collect's latest run is the one it started.
			acct := env.Client.GetWorkflow(ctx, workflows.RecollectAccountWorkflowID(fg.Host(), ev.owner), "")
			var p workflows.CollectOrgProgress
			if err := acct.Get(ctx, &p); err != nil || p.Started != 1 {
				t.Fatalf("%s: the account's re-collection: %+v, %v", tc.name, p, err)
			}
		}
		// The latest run of the name the event gave: the delivery was
		// answered after the hand-off, so it is the event's.
		ev.run = env.Client.GetWorkflow(ctx, workflows.CollectWorkflowID(repoid.ID{Host: fg.Host(), Owner: ev.newOwner, Name: ev.newName}), "")
	}

	outcome := func(sd *side, prefix string) identityOutcome {
		t.Helper()
		res, err := wait(sd.run)
		o := identityOutcome{Case: res.Case}
		var app *temporal.ApplicationError
		if errors.As(err, &app) {
			o.Failed = app.Type()
		} else if err != nil {
			o.Failed = err.Error()
		}
		var cb int64
		var owner, name string
		err = env.Store.Pool().QueryRow(ctx, `SELECT id, owner, name, stale_since IS NOT NULL, inaccessible_since IS NOT NULL,
			(SELECT count(*) FROM findings f JOIN scan_scopes s ON s.id = f.scope_id JOIN shards sh ON sh.id = s.shard_id WHERE sh.codebase_id = c.id)
			FROM codebases c WHERE host = $1 AND external_repo_id = $2`, fg.Host(), sd.externalID).
			Scan(&cb, &owner, &name, &o.Stale, &o.Inaccessible, &o.Findings)
		if err != nil {
			t.Fatalf("codebase of %s: %v", sd.owner, err)
		}
		o.SameCodebase = cb == sd.codebaseID
		o.Owner, o.Name = strings.TrimPrefix(owner, prefix), name
		return o
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ev, po := outcome(sides[i][0], "ev-"), outcome(sides[i][1], "po-")
			if ev != po {
				t.Errorf("event-driven %+v\n  poll-driven %+v", ev, po)
			}
			if ev.Owner == "" || po.Findings != 1 {
				t.Errorf("poll-driven outcome not the change's: %+v", po)
			}
		})
	}
}
