package gitcreds

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/google/go-github/v66/github"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/vcs"
)

// Code scanning uploads (architecture §8, "Where developers look: code
// scanning") need a token that may write code scanning results
// (security_events: write), which the reading token never has: it is
// minted apart, for the one repository, used for one upload and its
// polls, and revoked. The reading token's cache and its refusal of a
// token granted more than read access are untouched.

// CodeScanningDenied says why gitfleet may not upload a repository's
// results: no App on the host, the App not installed on the owner, or the
// installation lacking Code scanning alerts: write.
type CodeScanningDenied struct{ Why string }

func (e *CodeScanningDenied) Error() string { return e.Why }

// LacksCodeScanning is the reason an App that lacks the permission gives.
const LacksCodeScanning = "the App lacks Code scanning alerts: write"

// codeScanningAsked is what an upload's token is asked for.
var codeScanningAsked = map[string]string{"security_events": "write", "metadata": "read"}

// App is host's GitHub App, nil when none is configured for it.
func (s *Set) App(host string) *App {
	switch src := s.Source(host).(type) {
	case *App:
		return src
	case chained:
		for _, c := range src {
			if a, ok := c.(*App); ok {
				return a
			}
		}
	}
	return nil
}

// CodeScanningClient is a go-github client acting as owner's installation
// with a token that may write code scanning results of owner/name and
// nothing else (security_events: write, metadata: read, narrowed to the
// repository), behind the installation's rate gate; the installation's
// id, which bounds its uploads; and done, which revokes the token.
// *CodeScanningDenied when the installation may not (the App not
// installed on owner, or lacking the permission, as listed or as the mint
// answers).
func (a *App) CodeScanningClient(ctx context.Context, owner, name string) (c *github.Client, installation int64, done func(), err error) {
	in, err := a.installationOf(ctx, owner)
	if errors.Is(err, ErrNotInstalled) {
		return nil, 0, nil, &CodeScanningDenied{Why: fmt.Sprintf("%s is not installed on %s", a.Kind(), owner)}
	}
	if err != nil {
		return nil, 0, nil, err
	}
	if !a.mayWriteCodeScanning(in) {
		// The listing may be older than a grant: list again (this costs
		// a request per upload the App may not make, and those are
		// looked at once an hour: codescan.RecheckNotSent).
		a.forget(owner)
		if in, err = a.installationOf(ctx, owner); err != nil {
			if errors.Is(err, ErrNotInstalled) {
				return nil, 0, nil, &CodeScanningDenied{Why: fmt.Sprintf("%s is not installed on %s", a.Kind(), owner)}
			}
			return nil, 0, nil, err
		}
		if !a.mayWriteCodeScanning(in) {
			return nil, in.id, nil, &CodeScanningDenied{Why: LacksCodeScanning}
		}
	}
	app, err := a.asApp()
	if err != nil {
		return nil, in.id, nil, err
	}
	var tok mintedToken
	err = in.gate.do(ctx, func() (*github.Response, error) {
		req, err := app.NewRequest("POST", fmt.Sprintf("app/installations/%d/access_tokens", in.id), &github.InstallationTokenOptions{
			Repositories: []string{name},
			Permissions:  &github.InstallationPermissions{SecurityEvents: github.String("write"), Metadata: github.String("read")},
		})
		if err != nil {
			return nil, err
		}
		return app.Do(ctx, req, &tok)
	})
	var gerr *github.ErrorResponse
	if errors.As(err, &gerr) && gerr.Response != nil && gerr.Response.StatusCode == http.StatusUnprocessableEntity {
		// Granted since the listing, or the repository not in the
		// installation's selection: GitHub's words say which.
		a.forget(owner)
		return nil, in.id, nil, &CodeScanningDenied{Why: LacksCodeScanning + " on " + owner + "/" + name + " (" + gerr.Message + ")"}
	}
	if err != nil {
		return nil, in.id, nil, fmt.Errorf("mint a code scanning token of the App's installation on %s: %w", owner, err)
	}
	done = func() { a.revoke(context.WithoutCancel(ctx), tok.Token) }
	if beyond := tokenBeyond(codeScanningAsked, tok.Permissions); beyond != "" {
		done()
		return nil, in.id, nil, errclass.Wrap(errclass.Permanent, ReasonCredentials, fmt.Errorf(
			"%s's installation on %s granted a code scanning token more than gitfleet asked for (security_events: write, metadata: read): %s",
			a.Kind(), owner, beyond))
	}
	c, err = vcs.NewClient(a.host, tok.Token, a.gatedClient(in, 60*time.Second))
	if err != nil {
		done()
		return nil, in.id, nil, err
	}
	return c, in.id, done, nil
}

// mayWriteCodeScanning reports whether the installation's permissions, as
// last listed, include security_events: write.
func (a *App) mayWriteCodeScanning(in *installation) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return permissionLevels[in.securityEvents] >= permissionLevels["write"]
}
