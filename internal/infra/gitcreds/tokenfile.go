package gitcreds

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrNoToken is a token file's answer for an owner it names no token for.
var ErrNoToken = errors.New("no token configured")

// TokenFile reads tokens configured per owner, for those without an App: a
// fine-grained token or a machine user's that the organization issued for
// gitfleet. The file (GITFLEET_GIT_TOKENS_FILE) has a line per owner,
// "OWNER PATH", where PATH (relative to the file's directory) holds the
// token, and "*" stands for every other owner of the host; "#" starts a
// comment. Both are read at each use, so a rotated token is used at once
// and never kept.
type TokenFile struct {
	path string
}

// NewTokenFile checks the file once (so a typo fails the worker's start).
func NewTokenFile(path string) (*TokenFile, error) {
	f := &TokenFile{path: path}
	if _, err := f.entries(); err != nil {
		return nil, err
	}
	return f, nil
}

// Kind names the source in messages.
func (f *TokenFile) Kind() string { return "the token file" }

// Token returns owner's token, or the one for "*".
func (f *TokenFile) Token(_ context.Context, owner string) (string, error) {
	es, err := f.entries()
	if err != nil {
		return "", err
	}
	p, ok := es[strings.ToLower(owner)]
	if !ok {
		if p, ok = es["*"]; !ok {
			return "", fmt.Errorf("%w for %s in %s", ErrNoToken, owner, f.path)
		}
	}
	b, err := os.ReadFile(p)
	if err != nil {
		// Not the path: a token written in its place would be quoted.
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return "", fmt.Errorf("read the token file %s names for %s: %w", f.path, owner, err)
	}
	tok := string(bytes.TrimSpace(b))
	if tok == "" || strings.ContainsAny(tok, " \t\r\n") {
		return "", fmt.Errorf("the token file %s names for %s does not hold one token on one line", f.path, owner)
	}
	return tok, nil
}

// Refused does nothing: a configured token is renewed by whoever issued
// it, and read again at the next use.
func (f *TokenFile) Refused(string, string) {}

// entries maps lower-cased owners ("*") to token paths.
func (f *TokenFile) entries() (map[string]string, error) {
	b, err := os.ReadFile(f.path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	dir := filepath.Dir(f.path)
	out := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want \"OWNER PATH\" (the path of a file holding the token, never the token)", f.path, n)
		}
		p := fields[1]
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		out[strings.ToLower(fields[0])] = p
	}
	return out, nil
}
