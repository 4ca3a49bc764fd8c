// Package gitfleet keeps a fleet of Git repositories collected, verified,
// scanned and distributed, as durable Temporal workflows.
//
// The binaries are worker (the Temporal worker) and starter (the command
// line); workflows and activities hold the Temporal code; internal holds the
// domain logic and the parts they stand on. See README.md.
//
// This root package holds only checks of the repository's own files, such
// as the validation of docker-compose.yml.
package gitfleet
