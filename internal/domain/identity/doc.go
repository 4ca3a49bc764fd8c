// Package identity decides which codebase a collected repository belongs to
// (architecture §3). A codebase is identified by (host, external repository
// id), not by its name: names move (rename, transfer), and a name can be
// reused by a different repository (delete and recreate).
//
// The decision is a pure function of facts gathered elsewhere: the live
// codebase holding the requested name, whether its last collected commit could
// still be fetched by SHA from the remote, what the host's API says, and the
// codebase holding the API's repository id. The same function runs twice:
// once in the workflow to decide whether the API must be asked at all, and
// again inside the database transaction that applies it, on rows read under
// lock, so concurrent collections cannot apply a decision made on stale rows.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package identity
