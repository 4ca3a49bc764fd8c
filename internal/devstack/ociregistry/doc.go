// Package ociregistry is the in-process OCI registry that tests, benchmarks
// and the development stack pull snapshots from: go-containerregistry's
// pkg/registry on 127.0.0.1, wrapped with what a test needs and a real
// registry does not give, namely an egress throttle, byte counters and
// fault injection on blob downloads.
//
// # Throttle
//
// Options.BytesPerSecond (changed later by SetRate, transfers in flight
// included) models a registry behind a WAN link: one token bucket shared by
// every connection meters all response bodies (manifests and blobs). The
// bucket keeps an absolute schedule rather than sleeping a fixed time per
// chunk, so late wake-ups are caught up instead of accumulating; its only
// slack is a burst of 20 ms worth of bytes after idling, so a 10 MB transfer
// at 50 MB/s measures about 10% over the rate and longer ones less.
//
// # Counters and faults
//
// Only blob GETs are counted (BlobBytes, BlobBytesOf, BlobGets, BlobGetsOf);
// manifest GETs have their own counter (ManifestGets). Bytes are counted as
// they are handed to the connection, so a faulted download counts what was
// actually sent.
//
// Faults (Corrupt, Truncate, Fail, FailAfter, HoldAfter, PauseAt) arm the next n GETs of one
// digest, or of any blob when the digest is "". Each matching GET consumes
// one shot of the oldest armed fault, so a fault fires exactly n times.
// Truncation and FailAfter close the connection mid-body, which a client sees
// as an unexpected EOF (the Content-Length promised more).
//
// # Images
//
// RandomImage and RandomLayer build deterministic images from a seed: the
// same arguments give the same digests on every machine. A layer is an
// uncompressed tar of one file of ChaCha8 random bytes, regenerated from the
// seed each time it is read, so no layer is ever held in memory (its digest
// costs one hashing pass at construction). The registry itself, however,
// keeps pushed blobs in memory unless Options.Dir is set.
//
// Rules: development and test tooling. Only tests, other devstack packages
// and `starter dev` (build tag devstack) import it; the production binaries
// never link it (layout_test.go checks).
package ociregistry
