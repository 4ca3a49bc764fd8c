// Package temporalcli locates the pinned Temporal CLI and runs its
// development server (`temporal server start-dev`) for tests and the
// `make run` dev stack.
//
// The dev server runs in its own process group, so that a Ctrl-C in a
// terminal reaches only the calling program, which is expected to call
// DevServer.Stop. On Linux the server is also killed (SIGKILL) if the calling
// process dies without stopping it.
//
// Why not testsuite.StartDevServer: the SDK's launcher (with ExistingPath
// pointing at the pinned CLI) starts and stops a server well enough for a
// test, but it leaves the server running when the test binary is killed (no
// process group, no parent-death signal), keeps none of the server's output
// for error messages, and waits for one namespace only. Both the tests and
// `starter dev` need those, so this one launcher serves both.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package temporalcli
