// Package decay decides when a collected repository is due for
// re-collection (architecture §5): the more recently people looked at its
// results, the more often it is refreshed; abandoned repositories are not
// refreshed at all. Pure: the caller supplies the clock.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package decay
