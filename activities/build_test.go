package activities_test

import (
	"errors"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"gitfleet/activities"
	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/devstack/ociregistry"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/snapshot"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// A build on the repository's worker reads the commit from the worker's
// mirror: a mirror that holds it costs the Git host no request, one that
// does not is synced first. A worker without a registry, or a base image
// from a registry not allowed, is refused Permanent before any request.
func TestBuildSnapshotFromMirror(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("acme", "tools"); err != nil {
		t.Fatal(err)
	}
	commit, err := fg.Commit("acme", "tools", "main", map[string]string{"README.md": "hello\n", "bin/run.sh": "#!/bin/sh\n"}, "first")
	if err != nil {
		t.Fatal(err)
	}
	hosts, err := vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	reg, err := ociregistry.Start(ociregistry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	registry := reg.Addr() + "/gitfleet"
	sources, err := snapshot.ParseSources(registry, "")
	if err != nil {
		t.Fatal(err)
	}
	url := fg.CloneURL("acme", "tools")
	in := workflows.BuildInput{Snapshot: "tools", Repo: repoid.ID{Host: fg.Host(), Owner: "acme", Name: "tools"}, ExternalID: "1", Commit: commit}

	for _, tc := range []struct {
		name     string
		synced   bool // the mirror was synced before the build
		registry string
		base     string
		requests bool   // the Git host sees requests
		refused  string // the Permanent error's text, "" for a build
	}{
		{name: "the mirror holds the commit", synced: true, registry: registry},
		{name: "no mirror yet", registry: registry, requests: true},
		{name: "no registry", synced: true, refused: "set GITFLEET_REGISTRY"},
		{name: "a base image from a registry not allowed", registry: registry, base: "ghcr.io/elsewhere/base:1",
			refused: "not an allowed snapshot source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mirrors, err := mirror.New(t.TempDir(), nil)
			if err != nil {
				t.Fatal(err)
			}
			if tc.synced {
				if _, err := mirrors.Sync(t.Context(), url); err != nil {
					t.Fatal(err)
				}
			}
			fg.ResetCounts()
			b := &activities.Builds{Worker: "w1", Mirrors: mirrors, Hosts: hosts, Registry: tc.registry, Sources: sources}
			var s testsuite.WorkflowTestSuite
			ae := s.NewTestActivityEnvironment()
			ae.RegisterActivity(b)
			in := in
			in.BaseImage = tc.base
			v, err := ae.ExecuteActivity(b.BuildSnapshotFromMirror, in)
			if got := fg.GitRequests() > 0; got != tc.requests {
				t.Errorf("the Git host got %d requests, want some: %t", fg.GitRequests(), tc.requests)
			}
			if tc.refused != "" {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != string(errclass.Permanent) || !strings.Contains(err.Error(), tc.refused) {
					t.Fatalf("build: %v, want Permanent %q", err, tc.refused)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var res workflows.BuildResult
			if err := v.Get(&res); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(res.ImageRef, registry+"/tools:"+commit[:12]) || res.Digest == "" || res.Files != 2 {
				t.Errorf("built %+v, want 2 files pushed to %s", res, registry)
			}
			if !mirrors.HoldsCommit(url, commit) {
				t.Error("the mirror does not hold the commit after the build")
			}
		})
	}
}
