package workflows_test

import (
	"os"
	"path/filepath"
	"testing"

	"gitfleet/activities"
	"gitfleet/internal/forge"
	"gitfleet/internal/gitmirror"
	"gitfleet/internal/testenv"
	"gitfleet/internal/vcs"
)

// One stack for the whole test binary: a Temporal dev server, PostgreSQL,
// the forge serving Git over smart HTTP and the REST API, and an in-process
// worker with the real activities. Tests isolate themselves by owner names.
var (
	env   *testenv.Env
	fg    *forge.Forge
	hosts vcs.Hosts
)

func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, func(e *testenv.Env) (func(), error) {
		var err error
		if fg, err = forge.Start(forge.Options{Dir: filepath.Join(e.Dir, "forge")}); err != nil {
			return nil, err
		}
		hosts, err = vcs.NewHosts(vcs.Host{Name: fg.Host(), GitURL: fg.URL(), APIURL: fg.APIURL()})
		if err != nil {
			return nil, err
		}
		mirrors, err := gitmirror.New(filepath.Join(e.Dir, "mirrors"), nil)
		if err != nil {
			return nil, err
		}
		stop, err := e.StartWorker(&activities.Activities{Store: e.Store, Mirrors: mirrors, Hosts: hosts, Log: e.Log})
		if err != nil {
			return nil, err
		}
		return func() { stop(); fg.Close() }, nil
	}))
}
