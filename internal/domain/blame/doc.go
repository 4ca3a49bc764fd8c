// Package blame decides whose doing a failure is (architecture §2, "Failure
// model"): the repository's own — it is gone, private without access to it,
// or corrupt — which counts toward the failures in a row that take it out of
// the re-collection sweep (decay.MaxFailures), or the host's and the
// infrastructure's — an outage, a proxy, TLS or DNS trouble, an expired
// token, the database, a timeout, a cancel — which never does: those trip the
// sweep's circuit breaker, and the repository is collected again once they
// are over.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package blame
