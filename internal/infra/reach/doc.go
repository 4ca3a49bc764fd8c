// Package reach decides where a worker may reach on behalf of a request
// (docs/architecture.md §11): the hosts its Git fetches dial and the local
// paths a scan opens. A scan request names any URL or path it likes; a
// worker fetches and opens it from inside the network, so without these
// checks a request could make it probe internal ports and endpoints (a
// cloud's metadata service at 169.254.169.254) or read any repository on
// its disk.
//
// Hosts are checked twice: by name before a request is sent (the URL's
// host must be listed), and by address as each connection is dialed (a
// loopback, private or link-local address only for a host listed by name or
// address), so that a listed name whose DNS answer changes — rebinding to
// 127.0.0.1 or 169.254.169.254 — is refused before a connection exists.
//
// The policy is process-wide, like gitread's limits and go-git's
// transports: what this machine lets a repository make it reach.
//
// Rules: infrastructure. It imports no workflow code and nothing from
// internal/devstack (imports_test.go checks).
package reach
