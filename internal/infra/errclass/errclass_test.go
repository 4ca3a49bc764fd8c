package errclass

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"
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

func ghStatus(code int) error {
	return &github.ErrorResponse{Response: &http.Response{StatusCode: code, Request: &http.Request{}}}
}

func httpResp(code int) *http.Response {
	return &http.Response{StatusCode: code, Status: http.StatusText(code), Request: &http.Request{URL: &url.URL{}}}
}

func TestClassify(t *testing.T) {
	retryAfter := 42 * time.Second
	tests := []struct {
		name   string
		err    error
		class  Class
		reason string
	}{
		{"explicit permanent", Permanentf(ReasonInvalidInput, "bad name"), Permanent, ReasonInvalidInput},
		{"explicit stale owner, wrapped", fmt.Errorf("finalize: %w", StaleOwnerf("fence 3 superseded")), StaleOwner, ReasonStaleFence},
		{"cancelled", context.Canceled, Retryable, "interrupted"},
		{"github 404", ghStatus(404), Permanent, ReasonNotFound},
		{"github 401", ghStatus(401), Permanent, ReasonPermissionDenied},
		{"github 403", ghStatus(403), Permanent, ReasonPermissionDenied},
		{"github 422", ghStatus(422), Permanent, "rejected with 422"},
		{"github 502", ghStatus(502), Retryable, "server error 502"},
		{"github 429", ghStatus(429), Retryable, ReasonRateLimited},
		{"github primary rate limit", &github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: time.Now().Add(time.Minute)}}, Response: &http.Response{Request: &http.Request{}}}, Retryable, ReasonRateLimited},
		{"github secondary rate limit", &github.AbuseRateLimitError{RetryAfter: &retryAfter, Response: &http.Response{Request: &http.Request{}}}, Retryable, ReasonRateLimited},
		{"git not found", fmt.Errorf("clone: %w", transport.ErrRepositoryNotFound), Permanent, ReasonNotFound},
		{"git auth", transport.ErrAuthenticationRequired, Permanent, ReasonPermissionDenied},
		{"git forbidden", transport.ErrAuthorizationFailed, Permanent, ReasonPermissionDenied},
		{"git empty", transport.ErrEmptyRemoteRepository, Permanent, ReasonEmptyRepository},
		{"git not our ref", errors.New("unknown error: not our ref 0123abcd"), Permanent, ReasonNotFound},
		{"git http 503", plumbing.NewUnexpectedError(&githttp.Err{Response: httpResp(503)}), Retryable, "server error 503"},
		{"git http 400", plumbing.NewUnexpectedError(&githttp.Err{Response: httpResp(400)}), Permanent, "rejected with 400"},
		{"corrupt pack read from disk", fmt.Errorf("read: %w", packfile.ErrMalformedPackFile), Permanent, ReasonCorrupt},
		{"corrupt pack received (the mirror says so)", Wrap(Retryable, ReasonCorruptPack, packfile.ErrMalformedPackFile), Retryable, ReasonCorruptPack},
		{"pg serialization", &pgconn.PgError{Code: "40001"}, Retryable, "transaction conflict"},
		{"pg admin shutdown", &pgconn.PgError{Code: "57P01"}, Retryable, "database unavailable"},
		{"pg unique violation", &pgconn.PgError{Code: "23505"}, Permanent, "database rejected the statement"},
		{"pg undefined table", &pgconn.PgError{Code: "42P01"}, Permanent, "database rejected the statement"},
		{"connection refused", &net.OpError{Op: "dial", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}, Retryable, ReasonUnreachable},
		{"no such host", fmt.Errorf("list refs: %w", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "no such host", Name: "x.invalid", IsNotFound: true}}), Retryable, ReasonUnreachable},
		{"resolver timed out", &net.OpError{Op: "dial", Err: &net.DNSError{Err: "i/o timeout", Name: "x.example", IsTimeout: true}}, Retryable, "network"},
		{"reset", fmt.Errorf("read: %w", syscall.ECONNRESET), Retryable, "network"},
		{"https to an http server", fmt.Errorf("get: %w", errors.New("http: server gave HTTP response to HTTPS client")), Permanent, ReasonUnsupported},
		{"unknown", errors.New("something odd"), Retryable, "unclassified"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got.Class != tt.class || got.Reason != tt.reason {
				t.Errorf("Classify(%v) = %s/%q, want %s/%q", tt.err, got.Class, got.Reason, tt.class, tt.reason)
			}
			if !errors.Is(got, tt.err) && got.Err != tt.err {
				t.Errorf("classified error lost its cause")
			}
		})
	}
	if Classify(nil) != nil {
		t.Error("Classify(nil) != nil")
	}
}

func TestRetryAfter(t *testing.T) {
	d := 42 * time.Second
	if got := Classify(&github.AbuseRateLimitError{RetryAfter: &d, Response: &http.Response{Request: &http.Request{}}}).RetryAfter; got != d {
		t.Errorf("secondary rate limit RetryAfter = %v, want %v", got, d)
	}
	reset := time.Now().Add(90 * time.Second)
	got := Classify(&github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: reset}}, Response: &http.Response{Request: &http.Request{}}}).RetryAfter
	if got < 85*time.Second || got > 95*time.Second {
		t.Errorf("primary rate limit RetryAfter = %v, want about 90s", got)
	}
	git503 := httpResp(503)
	git503.Header = http.Header{"Retry-After": []string{"3"}}
	if c := Classify(plumbing.NewUnexpectedError(&githttp.Err{Response: git503})); c.Class != Retryable || c.RetryAfter != 3*time.Second {
		t.Errorf("a Git host's 503 with Retry-After: 3: %s after %v, want Retryable after 3s", c.Class, c.RetryAfter)
	}
	past := Classify(&github.RateLimitError{Rate: github.Rate{Reset: github.Timestamp{Time: time.Now().Add(-time.Hour)}}, Response: &http.Response{Request: &http.Request{}}}).RetryAfter
	if past < time.Second {
		t.Errorf("a reset in the past must still wait a little, got %v", past)
	}
}

// The class of every way reading a repository fails (issue 12): only what
// can change is retried — a file that vanished under a concurrent writer, a
// full disk, an I/O error, the network, an interrupted attempt; damaged or
// missing data never is, since it reads the same the next time.
func TestClassifyRepositoryReading(t *testing.T) {
	pathErr := func(op string, errno syscall.Errno) error {
		return fmt.Errorf("read refs: %w", &fs.PathError{Op: op, Path: "/repo/refs/heads/main", Err: errno})
	}
	tests := []struct {
		name   string
		err    error
		class  Class
		reason string
	}{
		// Data: Permanent.
		{"gitread: corrupt object", fmt.Errorf("tree 1234 in commit 5678: %w", fmt.Errorf("%w: bad zlib header", gitread.ErrCorrupt)), Permanent, ReasonCorrupt},
		{"gitread: pack does not match its index", fmt.Errorf("open the packs: %w", fmt.Errorf("%w: pack checksum differs from its index's", gitread.ErrCorrupt)), Permanent, ReasonCorrupt},
		{"gitread: a cut-short object read by go-git", fmt.Errorf("%w: %w", gitread.ErrCorrupt, io.ErrUnexpectedEOF), Permanent, ReasonCorrupt},
		{"gitread: over the object size limit", fmt.Errorf("blob 12: %w", &gitread.LimitError{What: "object size", Detail: "delta target of 1073741824 bytes"}), Permanent, ReasonLimit + ": object size"},
		{"gitread: a pack over its limit, through go-git's fetch", fmt.Errorf("fetch x: %w", &gitread.LimitError{What: "pack size"}), Permanent, ReasonLimit + ": pack size"},
		{"gitread: a ref symlinked out of the repository", fmt.Errorf("open the packs: %w", gitread.ErrUnsafe), Permanent, ReasonUnsafe},
		{"go-git: zlib error in a pack", packfile.ErrZLib.AddDetails("unexpected EOF"), Permanent, ReasonCorrupt},
		{"go-git: invalid delta", fmt.Errorf("read: %w", packfile.ErrInvalidDelta), Permanent, ReasonCorrupt},
		{"go-git: object missing", fmt.Errorf("head commit: %w", plumbing.ErrObjectNotFound), Permanent, ReasonCorrupt},
		{"go-git: ref file is empty", fmt.Errorf("fetch: %w", dotgit.ErrEmptyRefFile), Permanent, ReasonCorrupt},
		{"go-git: malformed packed-refs", dotgit.ErrPackedRefsBadFormat, Permanent, ReasonCorrupt},
		{"go-git: symbolic ref target not found", dotgit.ErrSymRefTargetNotFound, Permanent, ReasonCorrupt},
		{"go-git: ref path is a directory", dotgit.ErrIsDir, Permanent, ReasonCorrupt},
		{"a directory where a file should be", pathErr("read", syscall.EISDIR), Permanent, ReasonCorrupt},
		{"gitread: a range without a tip", fmt.Errorf("walk: %w", gitread.ErrTipNotFound), Permanent, ReasonInvalidInput},
		{"go-git: no repository", fmt.Errorf("open: %w", git.ErrRepositoryNotExists), Permanent, ReasonNotFound},
		{"go-git: no such ref", plumbing.ErrReferenceNotFound, Permanent, ReasonNotFound},
		{"permission denied", pathErr("open", syscall.EACCES), Permanent, ReasonPermissionDenied},
		{"operation not permitted", pathErr("open", syscall.EPERM), Permanent, ReasonPermissionDenied},
		// What can change: Retryable.
		{"a file vanished (repack, ref update)", pathErr("open", syscall.ENOENT), Retryable, ReasonRace},
		{"go-git: a ref changed under an update", storage.ErrReferenceHasChanged, Retryable, ReasonRace},
		{"disk full", pathErr("write", syscall.ENOSPC), Retryable, ReasonDiskFull},
		{"quota", pathErr("write", syscall.EDQUOT), Retryable, ReasonDiskFull},
		{"I/O error", pathErr("read", syscall.EIO), Retryable, "file system"},
		{"a received pack did not verify (the mirror says so)", Wrap(Retryable, ReasonCorruptPack, fmt.Errorf("%w: %w", packfile.ErrMalformedPackFile, gitread.ErrCorrupt)), Retryable, ReasonCorruptPack},
		{"go-git: a transfer without a pack", packfile.ErrEmptyPackfile, Retryable, ReasonCorruptPack},
		{"connection cut mid-transfer", fmt.Errorf("fetch: %w", io.ErrUnexpectedEOF), Retryable, "network"},
		{"timeout", &net.OpError{Op: "read", Err: os.ErrDeadlineExceeded}, Retryable, "network"},
		{"the attempt was cancelled", fmt.Errorf("walk: %w", context.Canceled), Retryable, "interrupted"},
		{"the attempt ran out of time", context.DeadlineExceeded, Retryable, "interrupted"},
		// Explicit classes win over what the chain holds.
		{"explicit permanent over a network error", Wrap(Permanent, ReasonCorrupt, io.ErrUnexpectedEOF), Permanent, ReasonCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Classify(tt.err)
			if got.Class != tt.class || got.Reason != tt.reason {
				t.Errorf("Classify(%v) = %s/%q, want %s/%q", tt.err, got.Class, got.Reason, tt.class, tt.reason)
			}
		})
	}
}

// The reasons of data over a limit are told apart from the others.
func TestIsLimit(t *testing.T) {
	for reason, want := range map[string]bool{
		ReasonLimit: true, ReasonLimit + ": object size": true, ReasonLimit + ": tree depth": true,
		ReasonCorrupt: false, "over a limitation": false, ReasonUnsafe: false,
	} {
		if IsLimit(reason) != want {
			t.Errorf("IsLimit(%q) = %t", reason, !want)
		}
	}
}

// A parked reason names the setting that would let the data through, the
// one the limit's own error names; a fixed bound says it has none.
func TestExplainNamesTheSetting(t *testing.T) {
	for _, c := range []struct {
		err  *gitread.LimitError
		want string
	}{
		{&gitread.LimitError{What: "object size", Setting: gitread.SettingMaxObjectBytes}, "raise GITFLEET_MAX_OBJECT_BYTES on the workers"},
		{&gitread.LimitError{What: "pack size", Setting: gitread.SettingMaxPackBytes}, "raise GITFLEET_MAX_PACK_BYTES on the workers"},
		{&gitread.LimitError{What: "inflated size"}, "raise GITFLEET_MAX_OBJECT_BYTES on the workers"},
		{&gitread.LimitError{What: "tree depth"}, "a fixed bound"},
		{&gitread.LimitError{What: "delta chain"}, "a fixed bound"},
		{&gitread.LimitError{What: "refs size"}, "a fixed bound"},
	} {
		c1 := Classify(fmt.Errorf("blob 1: %w", c.err))
		if got := Explain(c1.Reason); !strings.HasPrefix(got, c1.Reason+" (") || !strings.Contains(got, c.want) {
			t.Errorf("Explain(%q) = %q, want it to say %q", c1.Reason, got, c.want)
		}
	}
	if got := Explain(ReasonCorrupt); got != ReasonCorrupt {
		t.Errorf("Explain(%q) = %q: only limits are explained", ReasonCorrupt, got)
	}
}
