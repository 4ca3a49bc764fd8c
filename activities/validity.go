package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"go.temporal.io/sdk/activity"
	"go.uber.org/zap"

	"gitfleet/internal/domain/repoid"
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/domain/validity"
	"gitfleet/internal/infra/gitread"
	"gitfleet/internal/infra/mirror"
	"gitfleet/internal/infra/reach"
	"gitfleet/internal/infra/store"
	"gitfleet/internal/infra/validate"
	"gitfleet/workflows"
)

// Validity are the validity check activities (architecture §8, "Which
// secrets still work"). A secret exists only inside ValidateSecrets, read
// again from its blob in the mirror at the moment of the check and sent
// to its provider: never in a result, an error, a log line or a column.
type Validity struct {
	Store   *store.Store
	Mirrors *mirror.Mirrors
	// Scanner hashes what the span holds, which must be the secret the
	// finding hashed.
	Scanner *scan.Scanner
	// Checker sends the checks; nil or off, nothing is sent.
	Checker *validate.Checker
	Log     *zap.Logger
}

func (v *Validity) enabled() []string {
	if v.Checker == nil {
		return nil
	}
	return v.Checker.Settings().EnabledProviders()
}

// ListValidation pages the secrets to check, grouped by repository.
func (v *Validity) ListValidation(ctx context.Context, in workflows.ListValidationInput) (workflows.ValidationPage, error) {
	providers := v.enabled()
	if len(providers) == 0 {
		return workflows.ValidationPage{}, nil
	}
	limit := max(in.Limit, 1)
	cands, err := v.Store.ValidationCandidates(ctx, store.ValidationFilter{ShardID: in.ShardID, SecretHash: in.SecretHash,
		Rules: validity.Rules(providers), Unchecked: in.Unchecked}, in.After.Scope, in.After.Finding, limit)
	if err != nil {
		return workflows.ValidationPage{}, AppError(err)
	}
	page := workflows.ValidationPage{Enabled: true, More: len(cands) == limit}
	batch := max(in.Batch, 1)
	for _, c := range cands {
		n := len(page.Groups)
		if n == 0 || page.Groups[n-1].ShardID != c.ShardID || len(page.Groups[n-1].Findings) >= batch {
			g := workflows.ValidationGroup{ShardID: c.ShardID, Location: c.Location}
			if c.Host != "" {
				g.Repo, g.Location = &repoid.ID{Host: c.Host, Owner: c.Owner, Name: c.Name}, ""
			}
			page.Groups = append(page.Groups, g)
			n++
		}
		page.Groups[n-1].Findings = append(page.Groups[n-1].Findings, c.FindingID)
		page.Next = workflows.ValidationCursor{Scope: c.ScopeID, Finding: c.FindingID}
	}
	return page, nil
}

// checkParallelism bounds the checks of one activity in flight: the
// checker's per-provider limits bound each provider, so the secrets of
// several providers go at once.
const checkParallelism = 8

// pending is one secret read and waiting for its check: it lives in this
// activity's memory only.
type pending struct {
	val    *validity.Validator
	target store.ValidationTarget
	secret validity.Secret
	// verdict is set instead when there is nothing to send (unreadable,
	// not plain, provider off).
	verdict *validity.Verdict
}

// ValidateSecrets checks one repository's secrets, by their first
// findings: each read again from its blob (the mirror's, synced first if
// this worker has none), checked with its provider, the answer recorded.
// Reading is sequential (one repository); the checks run concurrently
// within the checker's limits.
func (v *Validity) ValidateSecrets(ctx context.Context, in workflows.ValidateBatchInput) (workflows.ValidationCounts, error) {
	var out workflows.ValidationCounts
	var repo *openRepo
	defer func() {
		if repo != nil {
			_ = repo.closer.Close()
		}
	}()
	var work []pending
	for _, id := range in.Findings {
		if err := ctx.Err(); err != nil {
			return out, AppError(err)
		}
		rule, err := v.Store.RuleOfFinding(ctx, id)
		if errors.Is(err, store.ErrNoFinding) {
			continue // its scope was replaced since the page was read
		}
		if err != nil {
			return out, AppError(err)
		}
		val, ok := validity.ForRule(rule)
		if !ok {
			continue
		}
		t, err := v.Store.ValidationTarget(ctx, id, val.PairRules)
		if errors.Is(err, store.ErrNoFinding) {
			continue
		}
		if err != nil {
			return out, AppError(err)
		}
		if repo == nil {
			if repo, err = v.open(ctx, t); err != nil {
				v.logger().Warn("repository not readable for validity checks", zap.Int64("shard", in.ShardID),
					zap.String("error", v.Scanner.Digest(err.Error())))
				repo = &openRepo{closer: io.NopCloser(nil), failed: true}
			}
		}
		p := pending{val: val, target: t}
		p.secret, p.verdict = v.read(repo, val, t)
		work = append(work, p)
	}

	work = interleave(work)
	var mu sync.Mutex
	var firstErr error
	var done int
	slots := make(chan struct{}, checkParallelism)
	var wg sync.WaitGroup
	for i := range work {
		slots <- struct{}{}
		wg.Add(1)
		go func(p *pending) {
			defer func() { <-slots; wg.Done() }()
			verdict := p.verdict
			if verdict == nil {
				vd := v.Checker.Check(ctx, p.val, p.secret)
				verdict = &vd
			}
			p.secret = validity.Secret{}
			facts, _ := json.Marshal(verdict.Facts)
			revoked, err := v.Store.RecordValidity(ctx, p.target.Subject, p.target.ScopeID, p.target.Key, store.Validity{Provider: p.val.Provider,
				State: string(verdict.State), Class: string(verdict.Class), Detail: verdict.Detail, Facts: facts})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			done++
			if activity.IsActivity(ctx) {
				activity.RecordHeartbeat(ctx, done)
			}
			out.Checked++
			switch verdict.State {
			case validity.Valid:
				out.Valid++
			case validity.Invalid:
				out.Invalid++
			default:
				out.Unknown++
			}
			if revoked {
				out.Revoked++
			}
		}(&work[i])
	}
	wg.Wait()
	if firstErr != nil {
		return out, AppError(firstErr)
	}
	v.logger().Info("secrets checked", zap.Int64("shard", in.ShardID), zap.Int("checked", out.Checked), zap.Int("valid", out.Valid),
		zap.Int("invalid", out.Invalid), zap.Int("unknown", out.Unknown), zap.Int("revoked", out.Revoked))
	return out, nil
}

func (v *Validity) logger() *zap.Logger {
	if v.Log == nil {
		return zap.NewNop()
	}
	return v.Log
}

type openRepo struct {
	repo   *git.Repository
	closer io.Closer
	failed bool
}

// interleave orders work round-robin by provider, so that the slots are
// not all taken by one provider's checks waiting for its pace.
func interleave(work []pending) []pending {
	var order []string
	by := map[string][]pending{}
	for _, p := range work {
		if _, ok := by[p.val.Provider]; !ok {
			order = append(order, p.val.Provider)
		}
		by[p.val.Provider] = append(by[p.val.Provider], p)
	}
	out := make([]pending, 0, len(work))
	for len(out) < len(work) {
		for _, prov := range order {
			if q := by[prov]; len(q) > 0 {
				out, by[prov] = append(out, q[0]), q[1:]
			}
		}
	}
	return out
}

// read reads t's secret (and its pair) from the blob, or says why there
// is nothing to send.
func (v *Validity) read(repo *openRepo, val *validity.Validator, t store.ValidationTarget) (validity.Secret, *validity.Verdict) {
	unknown := func(c validity.Class, detail string) (validity.Secret, *validity.Verdict) {
		return validity.Secret{}, &validity.Verdict{State: validity.Unknown, Class: c, Detail: detail}
	}
	switch {
	case !v.Checker.Enabled(val.Provider):
		return unknown(validity.ClassProviderOff, "")
	case repo.failed:
		return unknown(validity.ClassUnreadable, "the repository could not be read")
	case t.Span.Decoded != "" || t.Span.Archive != "":
		return unknown(validity.ClassNotPlain, "found in decoded text or an archive")
	}
	content, err := v.readBlob(repo, t.Span.Blob)
	if err != nil {
		return unknown(validity.ClassUnreadable, "the blob could not be read")
	}
	secret, ok := v.secretAt(content, t.Span)
	if !ok {
		return unknown(validity.ClassChanged, "the span does not hold the secret found (another key version?)")
	}
	s := validity.Secret{Value: secret}
	for _, p := range t.Pairs {
		if p.Decoded != "" || p.Archive != "" {
			continue
		}
		if pair, ok := v.secretAt(content, p); ok {
			s.Pair = pair
			break
		}
	}
	return s, nil
}

// secretAt is the span's bytes, if they are the secret the finding hashed.
func (v *Validity) secretAt(content []byte, sp store.Span) (string, bool) {
	if sp.Start < 0 || sp.End > len(content) || sp.Start >= sp.End {
		return "", false
	}
	b := content[sp.Start:sp.End]
	if v.Scanner.SecretHash(b) != sp.SecretHash {
		return "", false
	}
	return string(b), true
}

// open opens the repository the target's shard scans: the local one, or
// this worker's mirror (synced first if it has none).
func (v *Validity) open(ctx context.Context, t store.ValidationTarget) (*openRepo, error) {
	var path string
	if t.Local {
		p, err := reach.LocalRepository(reach.LocalRoot(), t.Location)
		if err != nil {
			return nil, err
		}
		path = p
	} else {
		path = v.Mirrors.Path(t.Location)
		// Marked read while the checks read it: eviction and repacks
		// leave it alone.
		reading, err := v.Mirrors.Reading(ctx, t.Location)
		if err != nil {
			return nil, err
		}
		if r, closer, err := gitread.Open(path, walkCacheBytes); err == nil {
			return &openRepo{repo: r, closer: closers{closer, reading}}, nil
		}
		if _, err := v.Mirrors.Sync(ctx, t.Location); err != nil {
			reading.Close()
			return nil, err
		}
		r, closer, err := gitread.Open(path, walkCacheBytes)
		if err != nil {
			reading.Close()
			return nil, fmt.Errorf("open the repository: %w", err)
		}
		return &openRepo{repo: r, closer: closers{closer, reading}}, nil
	}
	r, closer, err := gitread.Open(path, walkCacheBytes)
	if err != nil {
		return nil, fmt.Errorf("open the repository: %w", err)
	}
	return &openRepo{repo: r, closer: closer}, nil
}

// closers closes each of them, in order.
type closers []io.Closer

func (cs closers) Close() error {
	var err error
	for _, c := range cs {
		err = errors.Join(err, c.Close())
	}
	return err
}

func (v *Validity) readBlob(repo *openRepo, blob []byte) ([]byte, error) {
	if len(blob) != len(plumbing.ZeroHash) {
		return nil, errors.New("not a blob id")
	}
	var h plumbing.Hash
	copy(h[:], blob)
	content, _, err := gitread.ReadBlob(repo.repo, h, v.Scanner.MaxBlobBytes())
	return content, err
}
