// Package secrets seals users' API tokens for the database with AES-256-GCM
// under a key that lives outside it (GITFLEET_TOKEN_KEY), so a copy of the
// database alone reveals no token.
//
// A sealed value names the key that sealed it by a short fingerprint, so a
// wrong key is a clear error rather than garbage, and it is bound to the
// row it belongs to (the additional data), so a ciphertext copied to
// another user's row does not open.
//
// It imports neither Temporal nor SQL.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package secrets
