// Package gitcreds holds the credentials gitfleet's worker reads private
// repositories with (architecture §3, "Private repositories"): a GitHub
// App's installation access tokens, minted on demand with a JWT signed by
// the App's private key, cached per installation and renewed before they
// expire, behind a per-installation rate gate, each asked for read access
// only (contents, metadata) and refused if granted more — but for a code
// scanning upload's token (codescanning.go: one repository, security_events
// write, revoked after use); or, for those
// without an
// App, tokens configured per owner in a file. Both answer "which token
// reads owner's repositories on this host?" for Git fetches (the mirror's
// Credentials) and for the API lookups of identity resolution
// (Directory).
//
// Tokens and the key stay in this process's memory: never in a workflow
// input or result, a log line, an error message, a metric, the database,
// a file gitfleet writes, or a process argument. The key is read from a
// file, never from the environment. Credentials go only to the configured
// host, over https (plain http only to a loopback address, as for the
// forge of `starter dev`).
//
// Rules: infrastructure. It imports no workflow code and nothing from
// internal/devstack (imports_test.go checks).
package gitcreds
