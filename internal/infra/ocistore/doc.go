// Package ocistore is a runner's local image store: an OCI image layout
// (oci-layout, index.json, blobs/sha256/) holding the snapshot images the
// runner pulls from a registry or from peer runners, and serving them to
// peers in turn (PeerHandler).
//
// # Pulling
//
// Pull resolves the manifest (for an index, this platform's image), then
// takes config and layers in manifest order, ParallelBlobs at once, and the
// manifest last. A blob
// the store holds is skipped; a missing one is tried at each source in
// turn, streamed into a temporary file beside the blobs while being hashed,
// and renamed into blobs/sha256/ only once digest and size match the
// manifest, after an fsync. So the layout only ever holds verified blobs, a
// stored manifest means a complete image, and a pull that is killed resumes
// from the blobs it had finished: Open deletes the temporary files and keeps
// the rest. A source that fails for a blob (connection, status, digest,
// size, truncation) is left for the next for that blob; one that stalls —
// answers no request, handshake and manifest included, or sends nothing,
// for the stall bound (PullOptions.Stall, 30 s by default) — is given up
// for the rest of the pull and named in Progress.Skipped at once, except
// the last source, every blob's fallback. When every source fails the
// error is Retryable and its reason names the last problem. Layers are
// never held in memory: a pull uses one 256 KiB buffer per blob it fetches
// at once.
//
// A manifest's sizes are its source's word: each, and every addition of
// them, is checked against Options.MaxImageBytes before anything is
// reserved or fetched, and a blob streams up to its declared size and no
// further ("longer than declared" leaves that source for the blob). A
// source that refuses this client (429, 401) is given up like one that
// stalls.
//
// Errors follow errclass: the quota ("exceeds store quota"), an image
// declaring too much (ReasonImageSize) and an image no source knows
// (errclass.ReasonNotFound) are Permanent, a bad reference or a negative
// size is ReasonInvalidInput, anything else is Retryable.
//
// # Serving
//
// PeerHandler serves the store read-only over the OCI distribution API,
// including what a pull in progress has verified so far: its manifest, and
// each blob as it arrives, short of the last byte until the blob is
// verified (a transfer that fails is cut off), so peers pull from a runner
// that is still pulling and no peer completes an unverified copy;
// PeerServer puts it behind a PeerAccess: a shared token (Token, which
// never prints) and limits per client address and in all.
//
// # Concurrency
//
// Several pulls and puts run at once in one process (one Store per
// directory). One mutex serialises index.json rewrites (temporary file and
// rename), blob commits and garbage collection. A pull pins every blob of
// its image before looking at what is present and until its index entry is
// written, so Remove's collection never deletes a blob a pull is counting
// on; two pulls needing the same missing blob download it once (the second
// waits, reporting the first's bytes as its own progress, and only fetches
// itself if the first failed); quota reservations
// keep concurrent pulls from overcommitting the store together.
//
// Blobs of a failed pull stay (they make the retry cheap) and count towards
// Usage until GC or the next Remove collects them; replacing an image under
// the same name collects what the old one leaves behind.
//
// Rules: infrastructure (drivers, files, network). It imports no workflow
// code (go.temporal.io/sdk/workflow, gitfleet/workflows, gitfleet/activities)
// and nothing from internal/devstack (imports_test.go checks); its tests use
// devstack/ociregistry as the registry.
package ocistore
