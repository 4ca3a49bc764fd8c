// Package brokenrepo builds a corpus of broken Git repositories, each with
// the outcome a scan of it must end in: the ways real repositories are
// damaged, unusual or merely large (an empty file under refs/, a dangling
// symbolic ref, junk in packed-refs, refs to trees and blobs, chains of
// annotated tags, corrupt loose objects, truncated packs, partial and
// shallow clones, a 200 MB blob, a binary file with a secret in it, an empty
// repository, 50,000 refs).
//
// Every Case is built in a directory of the caller's with the git command
// line and some file surgery, and declares what a scan must end in:
// Complete (refs git would ignore are ignored and counted), Partial with a
// counted reason, or Parked with a reason, and whether its planted secret
// must be found. The end-to-end test runs each through the ExecuteShard
// workflow (workflows/broken_repos_test.go).
//
// The one costly case, the 200 MB blob, is a sparse file that git streams
// into a pack (core.bigFileThreshold), so it takes a few hundred kilobytes
// of disk and git never holds it in memory.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package brokenrepo
