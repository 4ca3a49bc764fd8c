package ocibuild

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"gitfleet/internal/infra/errclass"
	"gitfleet/internal/infra/ocistore"
)

// Push writes img to ref (a tag or digest reference, as name.ParseReference
// reads it) and returns the manifest digest ("sha256:..."). Credentials come
// from the Docker keychain (docker config, credential helpers); registries
// on loopback or private addresses are spoken to over plain HTTP, as
// go-containerregistry decides; opts may add name.Insecure for others.
func Push(ctx context.Context, ref string, img v1.Image, opts ...name.Option) (string, error) {
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return "", errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err)
	}
	if err := remote.Write(r, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), keepCredentials(r)); err != nil {
		return "", registryErr(fmt.Errorf("push %s: %w", r, err))
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// Base fetches the image ref names (linux/amd64 if ref is an index), for a
// snapshot's --base. The image is read lazily: its layers are fetched when
// a push needs them, under the same ctx, so ctx must outlive the push.
func Base(ctx context.Context, ref string, opts ...name.Option) (v1.Image, error) {
	r, err := name.ParseReference(ref, opts...)
	if err != nil {
		return nil, errclass.Wrap(errclass.Permanent, errclass.ReasonInvalidInput, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain), keepCredentials(r))
	if err != nil {
		return nil, registryErr(fmt.Errorf("base image %s: %w", r, err))
	}
	return img, nil
}

// keepCredentials sends the keychain's credentials for r's registry to
// that registry only, not to a token service on another host its
// challenge names (ocistore.KeepCredentials).
func keepCredentials(r name.Reference) remote.Option {
	return remote.WithTransport(ocistore.KeepCredentials(r.Context().Registry, remote.DefaultTransport))
}

// registryErr classifies the registry's answers that no retry changes;
// errclass.Classify takes the rest (network faults, 5xx: Retryable).
func registryErr(err error) error {
	var te *transport.Error
	if !errors.As(err, &te) {
		return err
	}
	switch te.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		return errclass.Wrap(errclass.Permanent, errclass.ReasonPermissionDenied, err)
	case http.StatusNotFound:
		return errclass.Wrap(errclass.Permanent, errclass.ReasonNotFound, err)
	case http.StatusTooManyRequests:
		return errclass.Wrap(errclass.Retryable, errclass.ReasonRateLimited, err)
	}
	return err
}
