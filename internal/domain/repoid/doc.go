// Package repoid parses and validates the repository names users hand to
// gitfleet ("host/owner/name" or a clone URL) before anything is started.
//
// Everything here is pure: no network, no database. A request that fails to
// parse never reaches Temporal, and error messages never echo credentials.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package repoid
