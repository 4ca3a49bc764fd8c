// Package repogen generates Git repositories for tests and benchmarks with
// `git fast-import`: a linear history on main with files added and modified
// in nested directories, extra branches and tags spread over that history,
// planted secrets and binary blobs. Output is deterministic for a Spec: the
// author, dates and the pseudo-random content derive from Spec.Seed, so the
// same Spec always yields the same commit ids.
//
// Content looks like source code and configuration (Go, Python, YAML and
// Markdown lines of identifiers, comments and numbers) built from a neutral
// vocabulary, so a secret scanner's keyword prefilter sees realistic text and
// the planted secrets are the only intended findings.
//
// RealCode makes the opposite corpus: real source code (by default the Go
// toolchain's, $(go env GOROOT)/src), where a scanner's keywords are
// everywhere, over a history of files that arrive, grow, lose and regain
// blocks of lines, with topic branches merged, release branches and tags;
// CachedRealCode keeps one between runs.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package repogen
