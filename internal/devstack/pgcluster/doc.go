// Package pgcluster starts and stops a private PostgreSQL cluster under a
// data directory, using the PostgreSQL server binaries installed on the
// system (on Debian they live in /usr/lib/postgresql/<version>/bin, which is
// not on PATH).
//
// It is used by tests (throw-away clusters in t.TempDir()) and by the
// `make run` dev stack (a cluster whose data survives restarts).
//
// initdb and postgres refuse to run as root. When the calling process runs as
// uid 0 the server binaries are run as the "postgres" system user (created by
// Debian's postgresql package); the data directory and the socket directory
// are chowned to that user and the parent directories of the data directory
// are made traversable (o+x) where needed. Otherwise they run as the current
// user.
//
// The postmaster is a direct child of the calling process (it is not
// daemonized through pg_ctl), in its own process group so that a Ctrl-C in
// a terminal reaches only the calling program, which is expected to call
// Stop. On Linux the postmaster receives SIGINT (a fast shutdown) if the
// calling process dies without stopping it.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package pgcluster
