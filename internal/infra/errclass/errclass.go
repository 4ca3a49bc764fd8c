package errclass

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem/dotgit"
	"github.com/google/go-github/v66/github"
	"github.com/jackc/pgx/v5/pgconn"

	"gitfleet/internal/infra/gitread"
)

// Class is one of the three error classes. Its string is the Temporal
// ApplicationError type.
type Class string

const (
	Retryable  Class = "Retryable"
	Permanent  Class = "Permanent"
	StaleOwner Class = "StaleOwner"
)

// NonRetryable lists the classes a retry policy must not retry.
var NonRetryable = []string{string(Permanent), string(StaleOwner)}

// Reasons say why an error is Permanent (or why a Retryable one waits); they
// end up as shard park reasons and in failure records.
const (
	ReasonNotFound         = "not found"
	ReasonPermissionDenied = "permission denied"
	ReasonInvalidInput     = "invalid input"
	ReasonUnsupported      = "unsupported"
	ReasonRateLimited      = "rate limited"
	ReasonEmptyRepository  = "empty repository"
	ReasonRace             = "race condition detected"
	ReasonStaleFence       = "stale fence"
	// ReasonCorrupt: the repository's data is damaged or incomplete (an
	// object that does not inflate or parse, a truncated pack, a missing
	// object a ref or tree names, a ref file go-git cannot read). Reading
	// it again gives the same answer: Permanent.
	ReasonCorrupt = "corrupt repository"
	// ReasonCorruptPack: a pack received from a remote did not verify.
	// The mirror says so explicitly (Retryable: the transfer may have been
	// damaged, and the mirror refetches once before it gives up).
	ReasonCorruptPack = "corrupt pack"
	ReasonDiskFull    = "disk full"
	// ReasonLimit starts the reason of data over one of the bounds that
	// keep a hostile repository from exhausting a worker (gitread.Limits,
	// the depth of trees and delta chains, the size of refs), followed by
	// the bound: "over a limit: object size". The same data trips it
	// again: Permanent, until an operator raises the setting the error
	// names (see IsLimit).
	ReasonLimit = "over a limit"
	// ReasonUnsafe: a repository gitread will not read on this machine: a
	// file reached through a symbolic link that leads out of it, or a
	// FIFO or device where a file should be.
	ReasonUnsafe = "unsafe repository"
	// ReasonUnreachable: the host's name does not resolve or nothing
	// listens where it points (connection refused). Retryable for a
	// short while (a DNS blip, a restarting server), since an attempt
	// fails at once; callers bound how often (activities' unreachable
	// bound) and then give up Permanent with the cause. Not the
	// repository's doing: nothing is parked for it.
	ReasonUnreachable = "host unreachable"
)

// IsLimit reports whether reason is one of ReasonLimit's.
func IsLimit(reason string) bool {
	return reason == ReasonLimit || strings.HasPrefix(reason, ReasonLimit+": ")
}

// Setting names the setting that lets data refused for reason through
// (a limit's: "GITFLEET_MAX_OBJECT_BYTES"), or "" when none does: a
// fixed bound, or a reason that is not a limit. The inflate budget of a
// pack grows with the object limit (gitread.Limits).
func Setting(reason string) string {
	switch reason {
	case ReasonLimit + ": object size", ReasonLimit + ": inflated size":
		return gitread.SettingMaxObjectBytes
	case ReasonLimit + ": pack size":
		return gitread.SettingMaxPackBytes
	}
	return ""
}

// Explain is reason as an operator reads it where something is parked
// for it (the starter, the Web UI): a limit says what would let the data
// through, so nobody has to look the bound up.
func Explain(reason string) string {
	switch {
	case Setting(reason) != "":
		return reason + " (raise " + Setting(reason) + " on the workers, then retry)"
	case IsLimit(reason):
		return reason + " (a fixed bound: no setting reads it)"
	}
	return reason
}

// Error is an error whose class is already known.
type Error struct {
	Class  Class
	Reason string
	// RetryAfter, for Retryable errors, is how long to wait before the next
	// attempt (for example until a rate limit resets); zero means the retry
	// policy's backoff.
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// Wrap classifies err explicitly.
func Wrap(class Class, reason string, err error) *Error {
	return &Error{Class: class, Reason: reason, Err: err}
}

// Permanentf builds a Permanent error.
func Permanentf(reason, format string, args ...any) *Error {
	return Wrap(Permanent, reason, fmt.Errorf(format, args...))
}

// StaleOwnerf builds a StaleOwner error.
func StaleOwnerf(format string, args ...any) *Error {
	return Wrap(StaleOwner, ReasonStaleFence, fmt.Errorf(format, args...))
}

// Classify returns the class of err with its reason and retry delay. Errors
// nobody recognises are Retryable: the retry policy's deadlines bound them,
// and misclassifying a transient fault as Permanent loses work.
func Classify(err error) *Error {
	if err == nil {
		return nil
	}
	var known *Error
	if errors.As(err, &known) {
		return &Error{Class: known.Class, Reason: known.Reason, RetryAfter: known.RetryAfter, Err: err}
	}
	c := classify(err)
	c.Err = err
	return c
}

func classify(err error) *Error {
	switch {
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &Error{Class: Retryable, Reason: "interrupted"}
	}
	if c := classifyGitHub(err); c != nil {
		return c
	}
	if c := classifyGit(err); c != nil {
		return c
	}
	if c := classifyPostgres(err); c != nil {
		return c
	}
	if c := classifyFiles(err); c != nil {
		return c
	}
	if c := classifyNetwork(err); c != nil {
		return c
	}
	return &Error{Class: Retryable, Reason: "unclassified"}
}

func classifyGitHub(err error) *Error {
	var rl *github.RateLimitError
	if errors.As(err, &rl) {
		return &Error{Class: Retryable, Reason: ReasonRateLimited, RetryAfter: untilReset(rl.Rate.Reset.Time)}
	}
	var abuse *github.AbuseRateLimitError
	if errors.As(err, &abuse) {
		d := time.Minute // GitHub's advice when no Retry-After is given
		if abuse.RetryAfter != nil {
			d = *abuse.RetryAfter
		}
		return &Error{Class: Retryable, Reason: ReasonRateLimited, RetryAfter: d}
	}
	var accepted *github.AcceptedError
	if errors.As(err, &accepted) {
		return &Error{Class: Retryable, Reason: "accepted, not ready"}
	}
	var resp *github.ErrorResponse
	if errors.As(err, &resp) && resp.Response != nil {
		return byResponse(resp.Response, resp.Message)
	}
	return nil
}

// byResponse classifies an HTTP error answer by its status and what it
// says about when to come back, as GitHub documents it for its rate
// limits (and HTTP for any 429 or 5xx): a Retry-After on a 403, 429 or
// 5xx is followed, whatever the body says; a 403 or 429 with
// X-RateLimit-Remaining 0 waits until X-RateLimit-Reset; a 403 or 429
// whose message says it is a secondary rate limit, or a 429 that says
// nothing, waits a minute (GitHub: "wait for at least one minute").
func byResponse(r *http.Response, message string) *Error {
	code := r.StatusCode
	limitable := code == http.StatusForbidden || code == http.StatusTooManyRequests
	if limitable || code >= 500 {
		if d, ok := retryAfter(r.Header.Get("Retry-After")); ok {
			reason := ReasonRateLimited
			if code >= 500 {
				reason = fmt.Sprintf("server error %d", code)
			}
			return &Error{Class: Retryable, Reason: reason, RetryAfter: d}
		}
	}
	if limitable {
		if r.Header.Get("X-RateLimit-Remaining") == "0" {
			if reset, err := strconv.ParseInt(r.Header.Get("X-RateLimit-Reset"), 10, 64); err == nil {
				return &Error{Class: Retryable, Reason: ReasonRateLimited, RetryAfter: untilReset(time.Unix(reset, 0))}
			}
			return &Error{Class: Retryable, Reason: ReasonRateLimited, RetryAfter: time.Minute}
		}
		if code == http.StatusTooManyRequests || strings.Contains(strings.ToLower(message), "secondary rate limit") {
			return &Error{Class: Retryable, Reason: ReasonRateLimited, RetryAfter: time.Minute}
		}
	}
	return byStatus(code)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(v string) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs >= 0 {
		return max(time.Duration(secs)*time.Second, time.Second), true
	}
	if at, err := http.ParseTime(v); err == nil {
		return max(time.Until(at), time.Second), true
	}
	return 0, false
}

func untilReset(reset time.Time) time.Duration {
	d := time.Until(reset) + time.Second
	if d < time.Second {
		d = time.Second
	}
	return d
}

func byStatus(code int) *Error {
	switch {
	case code == http.StatusNotFound, code == http.StatusGone:
		return &Error{Class: Permanent, Reason: ReasonNotFound}
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		return &Error{Class: Permanent, Reason: ReasonPermissionDenied}
	case code == http.StatusTooManyRequests:
		return &Error{Class: Retryable, Reason: ReasonRateLimited}
	case code == http.StatusRequestTimeout, code >= 500:
		return &Error{Class: Retryable, Reason: fmt.Sprintf("server error %d", code)}
	case code >= 400:
		return &Error{Class: Permanent, Reason: fmt.Sprintf("rejected with %d", code)}
	}
	return &Error{Class: Retryable, Reason: fmt.Sprintf("unexpected status %d", code)}
}

func classifyGit(err error) *Error {
	var limit *gitread.LimitError
	if errors.As(err, &limit) {
		return &Error{Class: Permanent, Reason: ReasonLimit + ": " + limit.What}
	}
	switch {
	case errors.Is(err, gitread.ErrUnsafe):
		return &Error{Class: Permanent, Reason: ReasonUnsafe}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &Error{Class: Permanent, Reason: ReasonNotFound}
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed),
		errors.Is(err, transport.ErrInvalidAuthMethod):
		return &Error{Class: Permanent, Reason: ReasonPermissionDenied}
	case errors.Is(err, transport.ErrEmptyRemoteRepository):
		return &Error{Class: Permanent, Reason: ReasonEmptyRepository}
	case strings.Contains(err.Error(), "not our ref"):
		return &Error{Class: Permanent, Reason: ReasonNotFound}
	case errors.Is(err, packfile.ErrEmptyPackfile):
		// Only a transfer ends with no pack at all.
		return &Error{Class: Retryable, Reason: ReasonCorruptPack}
	case errors.Is(err, gitread.ErrCorrupt), isPackfileError(err),
		errors.Is(err, dotgit.ErrEmptyRefFile), errors.Is(err, dotgit.ErrPackedRefsBadFormat),
		errors.Is(err, dotgit.ErrSymRefTargetNotFound), errors.Is(err, dotgit.ErrIsDir),
		errors.Is(err, plumbing.ErrObjectNotFound):
		// Damaged data on disk (a pack received damaged is classified by
		// the mirror, explicitly): reading it again cannot help.
		return &Error{Class: Permanent, Reason: ReasonCorrupt}
	case errors.Is(err, gitread.ErrTipNotFound):
		return &Error{Class: Permanent, Reason: ReasonInvalidInput}
	case errors.Is(err, git.ErrRepositoryNotExists), errors.Is(err, plumbing.ErrReferenceNotFound):
		return &Error{Class: Permanent, Reason: ReasonNotFound}
	case errors.Is(err, storage.ErrReferenceHasChanged):
		return &Error{Class: Retryable, Reason: ReasonRace}
	}
	// go-git wraps HTTP failures it has no sentinel for in an
	// UnexpectedError that does not implement Unwrap.
	var unexpected *plumbing.UnexpectedError
	if errors.As(err, &unexpected) {
		var herr *githttp.Err
		if errors.As(unexpected.Err, &herr) && herr.Response != nil {
			return byResponse(herr.Response, "")
		}
		if unexpected.Err != nil {
			if c := classify(unexpected.Err); c.Reason != "unclassified" {
				return c
			}
		}
	}
	return nil
}

func classifyPostgres(err error) *Error {
	var pg *pgconn.PgError
	if errors.As(err, &pg) {
		switch class := pg.Code[:2]; {
		case pg.Code == "40001", pg.Code == "40P01": // serialization failure, deadlock
			return &Error{Class: Retryable, Reason: "transaction conflict"}
		case class == "08", class == "53", class == "57", class == "58": // connection, resources, operator intervention, system
			return &Error{Class: Retryable, Reason: "database unavailable"}
		case class == "22", class == "23", class == "42": // data, integrity, syntax or schema
			return &Error{Class: Permanent, Reason: "database rejected the statement"}
		}
		return &Error{Class: Retryable, Reason: "database error " + pg.Code}
	}
	if pgconn.Timeout(err) || pgconn.SafeToRetry(err) {
		return &Error{Class: Retryable, Reason: "database unavailable"}
	}
	var connect *pgconn.ConnectError
	if errors.As(err, &connect) {
		return &Error{Class: Retryable, Reason: "database unavailable"}
	}
	return nil
}

// isPackfileError reports go-git's errors of pack data (some are values
// made with details added, which errors.Is does not match).
func isPackfileError(err error) bool {
	var perr *packfile.Error
	return errors.As(err, &perr) || errors.Is(err, packfile.ErrMalformedPackFile) ||
		errors.Is(err, packfile.ErrInvalidDelta) || errors.Is(err, packfile.ErrDeltaCmd) ||
		errors.Is(err, packfile.ErrReferenceDeltaNotFound) || errors.Is(err, packfile.ErrInflatedSizeMismatch)
}

// classifyFiles sorts local file system failures: permission denied needs
// someone to change it; a full disk and an I/O error may clear; a file that
// vanished under a reader raced a writer (a repack, a ref update).
func classifyFiles(err error) *Error {
	var pathErr *fs.PathError
	var linkErr *os.LinkError
	if !errors.As(err, &pathErr) && !errors.As(err, &linkErr) {
		return nil
	}
	switch {
	case errors.Is(err, fs.ErrPermission):
		return &Error{Class: Permanent, Reason: ReasonPermissionDenied}
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return &Error{Class: Retryable, Reason: ReasonDiskFull}
	case errors.Is(err, fs.ErrNotExist):
		return &Error{Class: Retryable, Reason: ReasonRace}
	case errors.Is(err, syscall.EISDIR), errors.Is(err, syscall.ENOTDIR), errors.Is(err, syscall.ELOOP):
		// A repository's file where a directory should be, or the reverse.
		return &Error{Class: Permanent, Reason: ReasonCorrupt}
	}
	return &Error{Class: Retryable, Reason: "file system"}
}

func classifyNetwork(err error) *Error {
	var nerr net.Error
	var tlsHeader tls.RecordHeaderError
	switch {
	case errors.As(err, &tlsHeader), strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"):
		// Speaking TLS to a plain HTTP server (or the reverse) fails the
		// same way every time.
		return &Error{Class: Permanent, Reason: ReasonUnsupported}
	case isNoSuchHost(err), errors.Is(err, syscall.ECONNREFUSED):
		return &Error{Class: Retryable, Reason: ReasonUnreachable}
	case errors.As(err, &nerr),
		errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF),
		errors.Is(err, syscall.ECONNRESET), errors.Is(err, syscall.EPIPE):
		return &Error{Class: Retryable, Reason: "network"}
	}
	return nil
}

// isNoSuchHost reports a name the resolver says does not exist (not a
// resolver that timed out or failed: that may pass).
func isNoSuchHost(err error) bool {
	var dns *net.DNSError
	return errors.As(err, &dns) && dns.IsNotFound
}

// UnreachableCause is what a person needs to read of an unreachable
// host's error: "no such host" or "connection refused" ("" for others).
func UnreachableCause(err error) string {
	switch {
	case isNoSuchHost(err):
		return "no such host"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	}
	return ""
}
