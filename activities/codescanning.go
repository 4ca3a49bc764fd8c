package activities

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v66/github"
	"go.uber.org/zap"

	"gitfleet/internal/domain/codescan"
	"gitfleet/internal/domain/report"
	"gitfleet/internal/domain/shard"
	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/gitcreds"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/vcs"
	"gitfleet/workflows"
)

// CodeScanning uploads repositories' findings to GitHub code scanning
// (workflows.UploadCodeScanning; architecture §8, "Where developers look:
// code scanning"). Its token — minted for the one repository with
// security_events: write, revoked after the upload or the look — never
// leaves the activity: not in a result, an error, a log line or the
// database.
type CodeScanning struct {
	Store *store.Store
	// Creds holds the host's GitHub App; code scanning needs one (a token
	// file's tokens are refused: no token gitfleet reads with may write).
	Creds *gitcreds.Set
	// Hosts name the repositories' URIs in the logs.
	Hosts vcs.Hosts
	// Rules are the scanner's rules, as the SARIF's tool lists them.
	Rules []report.Rule
	// PerHour bounds the uploads sent per App installation in any hour,
	// all workers together (config.DefaultCodeScanningPerHour when 0).
	PerHour int
	Log     *zap.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

func (c *CodeScanning) now() time.Time {
	if c.Now != nil {
		return c.Now().UTC()
	}
	return time.Now().UTC()
}

// CodeScanningDue says whether the codebase's results differ from its last
// upload's (codescan.Due).
func (c *CodeScanning) CodeScanningDue(ctx context.Context, in workflows.CodeScanningDueInput) (workflows.CodeScanningDueResult, error) {
	digest, results, err := c.digest(ctx, in.CodebaseID)
	if err != nil {
		return workflows.CodeScanningDueResult{}, AppError(err)
	}
	last, err := c.Store.LatestUpload(ctx, in.CodebaseID)
	if err != nil {
		return workflows.CodeScanningDueResult{}, AppError(err)
	}
	var l *codescan.Last
	if last != nil {
		l = &codescan.Last{Digest: last.Digest, State: last.State, At: last.CreatedAt}
	}
	due, why := codescan.Due(l, digest, results, c.now())
	return workflows.CodeScanningDueResult{Due: due, Why: why}, nil
}

// UploadSARIF sends the codebase's SARIF for the commit and records the
// upload (pending, with GitHub's id), or records why nothing was sent:
// no App on the host, the App not installed on the owner, or lacking Code
// scanning alerts: write. Past the installation's hourly bound it asks to
// be retried when a slot frees.
func (c *CodeScanning) UploadSARIF(ctx context.Context, in workflows.UploadSARIFInput) (workflows.UploadSARIFResult, error) {
	row := &store.CodeScanningUpload{CodebaseID: in.CodebaseID, Repository: in.Repo.String(), Commit: in.Commit,
		Ref: codescan.Ref(in.Branch), Attempt: in.Attempt}
	notSent := func(why string) (workflows.UploadSARIFResult, error) {
		digest, _, err := c.digest(ctx, in.CodebaseID)
		if err != nil {
			return workflows.UploadSARIFResult{}, AppError(err)
		}
		row.State, row.Message, row.Digest = codescan.NotSent, why, digest
		if err := c.Store.RecordUpload(ctx, row); err != nil {
			return workflows.UploadSARIFResult{}, AppError(err)
		}
		c.logger(ctx).Info("code scanning: not sent", zap.String("repository", row.Repository), zap.String("why", why))
		return workflows.UploadSARIFResult{UploadID: row.ID, State: row.State, Message: why}, nil
	}
	app := c.Creds.App(in.Repo.Host)
	if app == nil {
		return notSent(fmt.Sprintf("no GitHub App is configured for %s (code scanning uploads need one with Code scanning alerts: write)", in.Repo.Host))
	}
	gh, installation, done, err := app.CodeScanningClient(ctx, in.Repo.Owner, in.Repo.Name)
	var denied *gitcreds.CodeScanningDenied
	if errors.As(err, &denied) {
		return notSent(denied.Why)
	}
	if err != nil {
		return workflows.UploadSARIFResult{}, AppError(err)
	}
	defer done()
	row.Account = in.Repo.Host + "/installation/" + strconv.FormatInt(installation, 10)
	if err := c.withinBound(ctx, row.Account); err != nil {
		return workflows.UploadSARIFResult{}, err
	}
	var log bytes.Buffer
	zw := gzip.NewWriter(&log)
	sum, err := c.repositorySARIF(ctx, in.CodebaseID, c.repository(in), zw)
	var limit *report.LimitError
	if errors.As(err, &limit) {
		return notSent(limit.Error())
	}
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		return workflows.UploadSARIFResult{}, AppError(err)
	}
	row.Digest, row.Open, row.Dismissed = sum.Sum(), sum.Open, sum.Dismissed
	id, _, err := gh.CodeScanning.UploadSarif(ctx, in.Repo.Owner, in.Repo.Name, &github.SarifAnalysis{
		CommitSHA: github.String(in.Commit), Ref: github.String(row.Ref),
		Sarif: github.String(base64.StdEncoding.EncodeToString(log.Bytes())), ToolName: github.String("gitfleet"),
	})
	if err != nil {
		return workflows.UploadSARIFResult{}, AppError(fmt.Errorf("upload the SARIF of %s: %w", in.Repo, err))
	}
	sent := c.now()
	row.SarifID, row.State, row.SentAt = id.GetID(), codescan.Pending, &sent
	if err := c.Store.RecordUpload(ctx, row); err != nil {
		return workflows.UploadSARIFResult{}, AppError(err)
	}
	c.logger(ctx).Info("code scanning: uploaded", zap.String("repository", row.Repository), zap.String("sarifId", row.SarifID),
		zap.Int("open", row.Open), zap.Int("dismissed", row.Dismissed), zap.Int("upload", in.Attempt))
	return workflows.UploadSARIFResult{UploadID: row.ID, State: row.State}, nil
}

// withinBound is nil while the installation sent fewer than PerHour
// uploads in the last hour, and otherwise a Retryable error that retries
// when the oldest of them is an hour old.
func (c *CodeScanning) withinBound(ctx context.Context, account string) error {
	per := c.PerHour
	if per <= 0 {
		per = 100
	}
	now := c.now()
	n, oldest, err := c.Store.UploadsSentSince(ctx, account, now.Add(-time.Hour))
	if err != nil {
		return AppError(err)
	}
	if n < per || oldest == nil {
		return nil
	}
	wait := max(oldest.Add(time.Hour).Sub(now), time.Second)
	return AppError(&errclass.Error{Class: errclass.Retryable, Reason: errclass.ReasonRateLimited, RetryAfter: wait,
		Err: fmt.Errorf("code scanning: %d uploads of this installation in the last hour (GITFLEET_CODE_SCANNING_PER_HOUR=%d); the next in %s",
			n, per, wait.Round(time.Second))})
}

// SARIFStatus asks GitHub how the upload's processing went and records it.
func (c *CodeScanning) SARIFStatus(ctx context.Context, uploadID int64) (workflows.SARIFStatusResult, error) {
	row, err := c.Store.Upload(ctx, uploadID)
	if err != nil {
		return workflows.SARIFStatusResult{}, AppError(err)
	}
	if row == nil || row.SarifID == "" {
		return workflows.SARIFStatusResult{}, AppError(errclass.Permanentf(errclass.ReasonNotFound, "code scanning upload %d is not recorded", uploadID))
	}
	repo, err := parseRepository(row.Repository)
	if err != nil {
		return workflows.SARIFStatusResult{}, AppError(err)
	}
	app := c.Creds.App(repo.host)
	if app == nil {
		return workflows.SARIFStatusResult{}, AppError(errclass.Permanentf(errclass.ReasonInvalidInput, "no GitHub App is configured for %s", repo.host))
	}
	gh, _, done, err := app.CodeScanningClient(ctx, repo.owner, repo.name)
	var denied *gitcreds.CodeScanningDenied
	if errors.As(err, &denied) {
		return workflows.SARIFStatusResult{}, AppError(errclass.Permanentf(errclass.ReasonPermissionDenied, "%s", denied.Why))
	}
	if err != nil {
		return workflows.SARIFStatusResult{}, AppError(err)
	}
	defer done()
	// go-github's SARIFUpload has no errors field: read GitHub's answer
	// whole.
	req, err := gh.NewRequest("GET", fmt.Sprintf("repos/%s/%s/code-scanning/sarifs/%s", url.PathEscape(repo.owner), url.PathEscape(repo.name),
		url.PathEscape(row.SarifID)), nil)
	if err != nil {
		return workflows.SARIFStatusResult{}, AppError(err)
	}
	var got struct {
		Status string   `json:"processing_status"`
		Errors []string `json:"errors"`
	}
	if _, err := gh.Do(ctx, req, &got); err != nil {
		return workflows.SARIFStatusResult{}, AppError(fmt.Errorf("the processing status of upload %s of %s: %w", row.SarifID, row.Repository, err))
	}
	state := got.Status
	switch state {
	case codescan.Pending, codescan.Complete, codescan.Failed:
	default:
		return workflows.SARIFStatusResult{}, AppError(errclass.Wrap(errclass.Retryable, "bad response",
			fmt.Errorf("code scanning answered processing_status %q for upload %s", state, row.SarifID)))
	}
	msg := strings.Join(got.Errors, "; ")
	if err := c.Store.SetUploadState(ctx, uploadID, state, msg); err != nil {
		return workflows.SARIFStatusResult{}, AppError(err)
	}
	return workflows.SARIFStatusResult{State: state, Message: msg}, nil
}

type repoName struct{ host, owner, name string }

func parseRepository(s string) (repoName, error) {
	p := strings.Split(s, "/")
	if len(p) != 3 {
		return repoName{}, errclass.Permanentf(errclass.ReasonInvalidInput, "repository %q is not host/owner/name", s)
	}
	return repoName{p[0], p[1], p[2]}, nil
}

// overLimit is the digest of results past what code scanning takes in a
// run (report.MaxResultsPerRun): nothing is sent, and that is recorded.
const overLimit = "over-the-limit"

// digest sums the results an upload of the codebase would carry, and
// counts them.
func (c *CodeScanning) digest(ctx context.Context, codebaseID int64) (string, int, error) {
	sum, err := c.repositorySARIF(ctx, codebaseID, nil, io.Discard)
	var limit *report.LimitError
	if errors.As(err, &limit) {
		return overLimit, report.MaxResultsPerRun + 1, nil
	}
	return sum.Sum(), sum.Open + sum.Dismissed, err
}

// repository is the log's repository: its URI (the clone URL's), the
// commit and the default branch uploaded for.
func (c *CodeScanning) repository(in workflows.UploadSARIFInput) *report.Repository {
	uri := "https://" + in.Repo.String()
	if h, err := c.Hosts.Lookup(in.Repo.Host); err == nil {
		uri = strings.TrimSuffix(h.CloneURL(in.Repo.Owner, in.Repo.Name), ".git")
	}
	return &report.Repository{Name: in.Repo.String(), URI: uri, Commit: in.Commit, Branch: codescan.Ref(in.Branch)}
}

// repositorySARIF writes the codebase's SARIF log to w (gzip or
// io.Discard) — the log of one repository (report.NewRepositorySARIF,
// with its versionControlProvenance) when repo is given — and sums its
// results: every occurrence of the repository's secrets but those the
// repository itself suppresses (.gitleaksignore, gitleaks:allow), a
// resolved secret's with the resolution's suppression (code scanning shows
// it dismissed). Past report.MaxResultsPerRun, a *report.LimitError.
func (c *CodeScanning) repositorySARIF(ctx context.Context, codebaseID int64, repo *report.Repository, w io.Writer) (codescan.Digest, error) {
	var sum codescan.Digest
	sh, err := c.Store.ShardByKey(ctx, shard.CodebaseKey(codebaseID))
	if err != nil || sh == nil {
		return sum, err
	}
	tool := report.Tool{Name: "gitfleet", Version: report.BuildVersion()}
	var sw *report.SARIF
	if repo != nil {
		sw, err = report.NewRepositorySARIF(w, tool, c.Rules, *repo)
	} else {
		sw, err = report.NewSARIF(w, tool, c.Rules)
	}
	if err != nil {
		return sum, err
	}
	err = c.Store.EachOccurrence(ctx, store.FleetFilter{ShardID: sh.ID}, 1000, func(s store.FleetSecret, o store.Occurrence) error {
		if o.Ignored != "" {
			return nil
		}
		// The severity follows the last validity check, as in starter's
		// reports.
		r := s.Report(o)
		if repo != nil {
			// The codebase's current name: the log's.
			r.Repository = repo.Name
		}
		if err := sw.Write(r); err != nil {
			return err
		}
		sum.Add(r.SecretFingerprint(), r.RuleID, r.File(), r.Line, r.Validity, r.Dismissed())
		return nil
	})
	if err != nil {
		return sum, err
	}
	return sum, sw.Close()
}

func (c *CodeScanning) logger(ctx context.Context) *zap.Logger { return activityLogger(ctx, c.Log) }
