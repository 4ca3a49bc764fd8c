// Package ocibuild turns a Git commit's tree into an OCI image (a
// "snapshot"): one tar layer holding the commit's files, added on top of an
// optional base image, labelled with the repository and the commit, so that
// runner hosts get a repository's files at an exact commit through any OCI
// registry. It also pushes images and fetches base images, with credentials
// from the Docker keychain only (never passed in).
//
// # Determinism
//
// Two builds of the same commit on the same base give the same manifest
// digest, on any machine, at any time, whatever the mirror's object packing:
//
//   - Entries are in byte order of their tar names (directories as "dir/"),
//     which is Git's tree order walked depth first, so a directory comes
//     right before its contents. The root itself has no entry.
//   - Directories are 0755, regular files 0644, executables (Git mode
//     100755) 0755; symbolic links (120000) are symlink entries with the
//     blob as their target, stored as written and never followed;
//     submodules (gitlinks, 160000) are skipped and counted. Note that git
//     archive and git checkout leave an empty directory where a submodule
//     is: a snapshot has nothing there.
//   - Every header has ModTime Unix 0, no access or change time, uid and gid
//     0, empty user and group names, and the PAX format (USTAR headers, with
//     PAX records only where USTAR cannot say it: long or non-ASCII names
//     and link targets, files of 8 GiB or more).
//   - The layer is gzip (klauspost/compress, level 6, no name, no time in
//     the header; OCI media types, or Docker ones on a Docker base),
//     compressed once while the tar is written; the layer's digest and diff
//     ID are computed on the same pass. go-containerregistry's tarball
//     layers, given a plain tar, recompress it on every read at a level of
//     their choosing; this package's layer serves the spooled file as is.
//   - The config's Created and the added history entry's are Unix 0; the
//     labels (LabelSource, LabelRevision, LabelRepository, LabelExternalID)
//     are merged over the base's; the platform is the base's, or linux/amd64.
//
// The diff ID depends only on the tree. The layer digest also depends on the
// compressor: upgrading klauspost/compress may change it (not the diff ID),
// so a rebuilt snapshot after such an upgrade is a new image.
//
// # Safety
//
// Tree entry names must be plain names: "", ".", "..", names with "/" or NUL
// and ".git" in any case (which git checkout refuses too) fail the build as
// Permanent invalid input, as do duplicate names in one tree and link
// targets that are empty, hold a NUL or are longer than PATH_MAX; a failed
// build removes its spool file. Every tree and blob
// read is checked against its object id, so a corrupt mirror cannot ship
// other content under a commit's name: a missing or corrupt object is
// Retryable (the caller fetches again); an unknown commit is Permanent, not
// found.
//
// # Memory
//
// Trees can be gigabytes: the layer is spooled to a temporary file in the
// caller's directory, and blobs are streamed from loose objects and packs
// (go-git reads any object above a small threshold without buffering it) so
// a build allocates a few MiB whatever its file sizes (TestBuildMemory:
// about 2.4 MiB for a 64 MiB file, loose or packed).
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks).
package ocibuild
