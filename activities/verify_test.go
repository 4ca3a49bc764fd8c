package activities

import (
	"testing"

	"go.temporal.io/sdk/testsuite"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// VerifyCommit answers from the mirror the collection's sync just left:
// no request to the Git host when the commit is reachable from the refs
// the sync saw; the host is asked (a fetch by SHA) only when the mirror
// cannot tell — other refs, or a commit a force push left unreachable.
func TestVerifyCommitAnswersFromTheSyncedMirror(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	hosts, err := vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL()})
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Hosts: hosts}
	if a.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	commit := func(file string) string {
		sha, err := fg.Commit("acme", "app", "main", map[string]string{file: "x\n"}, file)
		if err != nil {
			t.Fatal(err)
		}
		return sha
	}
	last := commit("a.txt")
	commit("b.txt")
	repo := repoid.ID{Host: fg.Host(), Owner: "acme", Name: "app"}

	var env testsuite.WorkflowTestSuite
	act := env.NewTestActivityEnvironment()
	act.RegisterActivity(a)
	val, err := act.ExecuteActivity(a.SyncMirror, repo)
	if err != nil {
		t.Fatal(err)
	}
	var synced workflows.SyncMirrorResult
	if err := val.Get(&synced); err != nil {
		t.Fatal(err)
	}
	verify := func(sha, digest string) (ok bool, requests int64) {
		t.Helper()
		fg.ResetCounts()
		val, err := act.ExecuteActivity(a.VerifyCommit, workflows.VerifyCommitInput{Repo: repo, SHA: sha, RefsDigest: digest})
		if err != nil {
			t.Fatal(err)
		}
		if err := val.Get(&ok); err != nil {
			t.Fatal(err)
		}
		return ok, fg.GitRequests()
	}
	if ok, n := verify(last, synced.RefsDigest); !ok || n != 0 {
		t.Fatalf("verify from the synced mirror = %t with %d Git requests; want true with none", ok, n)
	}
	if ok, n := verify(last, "refs another worker's sync saw"); !ok || n == 0 {
		t.Fatalf("verify without the sync's refs = %t with %d Git requests; want true, asked of the host", ok, n)
	}
}
