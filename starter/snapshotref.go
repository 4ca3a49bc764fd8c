package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"gitfleet/internal/domain/textsafe"
	"gitfleet/internal/infra/ocistore"
)

// resolveTimeout bounds the starter's look at the registry: a registry the
// starter cannot reach in this time is left to the runners.
const resolveTimeout = 30 * time.Second

// errNoSuchImage: the registry answered that the image does not exist.
var errNoSuchImage = errors.New("no such image")

// resolveImage asks the image's registry, once, for the digest a reference
// names: an image that does not exist is refused before any runner is
// asked for it (each would try it in turn). It reads with the starter's
// own credentials (the docker config, as runners do); a registry the
// starter cannot reach or read answers unknown (""), and the runners, with
// their own network and credentials, decide.
func (a *app) resolveImage(ctx context.Context, ref string) (digest string, err error) {
	parsed, err := name.ParseReference(ref)
	if err == nil && slices.Contains(a.cfg.InsecureRegistries, parsed.Context().RegistryStr()) {
		parsed, err = name.ParseReference(ref, name.Insecure)
	}
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	desc, err := remote.Head(parsed, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithTransport(ocistore.KeepCredentials(parsed.Context().Registry, remote.DefaultTransport)))
	if err == nil {
		return desc.Digest.String(), nil
	}
	if notFound(err) {
		return "", fmt.Errorf("%w: %s", errNoSuchImage, textsafe.Printable(ref))
	}
	fmt.Fprintf(a.stderr, "Could not check %s with the registry (%s): the runners will try it\n", textsafe.Printable(ref), shortenLine(textsafe.Printable(err.Error()), 200))
	return "", nil
}

// notFound reports whether a registry answered that a manifest or
// repository does not exist.
func notFound(err error) bool {
	var terr *transport.Error
	if !errors.As(err, &terr) {
		return false
	}
	if terr.StatusCode == http.StatusNotFound {
		return true
	}
	for _, d := range terr.Errors {
		if d.Code == transport.ManifestUnknownErrorCode || d.Code == transport.NameUnknownErrorCode {
			return true
		}
	}
	return false
}
