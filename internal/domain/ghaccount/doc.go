// Package ghaccount is what one GitHub account sees, as gitfleet caches it
// per user (architecture §6): organizations (global, shared by everyone who sees
// them), repositories (per user: personal or from an organization), the
// lists a cache holds, and the pages they were fetched in with their
// conditional-request validators.
//
// Pure values and rules: no network, no Temporal, no SQL.
//
// Rules: pure domain logic. It imports no Temporal SDK, no SQL driver and no
// gitfleet package outside internal/domain (imports_test.go checks).
package ghaccount
