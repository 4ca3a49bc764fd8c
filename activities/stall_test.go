package activities

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"gitfleet/internal/devstack/forge"
	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/liveness"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/vcs"
)

// A mirror sync whose remote answers the ref listing and then sends no
// pack is given up as Retryable "remote stalled" within the stall bound,
// its connection closed, instead of holding its slot to the start-to-close
// timeout.
func TestSyncMirrorGivesAStalledRemoteUp(t *testing.T) {
	fg, err := forge.Start(forge.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer fg.Close()
	if _, err := fg.CreateRepo("acme", "app"); err != nil {
		t.Fatal(err)
	}
	if _, err := fg.Commit("acme", "app", "main", map[string]string{"a.txt": "a\n"}, "a"); err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(fg.URL())
	if err != nil {
		t.Fatal(err)
	}
	forward := httputil.NewSingleHostReverseProxy(u)
	gone := make(chan struct{})
	hung := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			forward.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
		close(gone)
	}))
	defer hung.Close()
	hu, _ := url.Parse(hung.URL)
	hosts, err := vcs.NewHosts(vcs.Host{Name: hu.Host, GitURL: hung.URL, APIURL: hung.URL + "/api/"})
	if err != nil {
		t.Fatal(err)
	}
	a := &Activities{Hosts: hosts, Liveness: liveness.Bounds{Every: 10 * time.Millisecond, Stall: 200 * time.Millisecond}}
	if a.Mirrors, err = mirror.New(t.TempDir(), nil); err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(a)
	_, err = env.ExecuteActivity(a.SyncMirror, repoid.ID{Host: hu.Host, Owner: "acme", Name: "app"})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != string(errclass.Retryable) || !strings.Contains(app.Error(), "sent nothing") {
		t.Fatalf("sync of a stalled remote = %v; want a Retryable stall", err)
	}
	select {
	case <-gone:
	case <-time.After(time.Minute):
		t.Fatal("the stalled connection was never closed")
	}
}
