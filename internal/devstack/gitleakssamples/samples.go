// Package gitleakssamples holds the labelled samples gitleaks validates its
// own default rules with: the true and false positives each rule
// constructor of gitleaks' config generator (cmd/generate/config) builds and
// passes to utils.Validate or utils.ValidateWithPaths. They are a corpus
// nobody at gitfleet wrote, so rules tuned here cannot have been tuned to it.
//
// The samples are obtained by running gitleaks' own generator, never by
// copying its code: the generator is built in a throwaway module in a
// temporary directory, with one file swapped by `go build -overlay`, its
// validate.go, for a recorder that writes every sample it is handed and
// validates nothing. The Go tool refuses overlays of files in the module
// cache, so the throwaway module vendors its dependencies (`go mod vendor`,
// copies of the checksum-verified module files) and the overlay replaces
// the vendored copy. The build then differs from gitleaks' only in that
// file, and Extract checks that the configuration it generates is
// byte-for-byte the config/gitleaks.toml the release ships.
//
// The generator draws most samples at random (its secrets package seeds
// github.com/lucasjones/reggen from the clock), so two extractions differ.
// Load caches one extraction per gitleaks version in the user cache dir,
// so that figures measured on it are comparable between runs; delete the
// file to draw new samples.
package gitleakssamples

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// Module is gitleaks' Go module.
const Module = "github.com/zricethezav/gitleaks/v8"

// generator is the package whose main builds gitleaks' default
// configuration, validating each rule against its samples.
const generator = Module + "/cmd/generate/config"

// Sample is one labelled sample of gitleaks' generator.
type Sample struct {
	Rule string `json:"rule"` // the id of the rule whose constructor built it
	True bool   `json:"true"` // the rule must find it; false: the rule must not
	Path string `json:"path"` // the file path it is validated at; "" for none
	Text string `json:"text"` // the blob
}

// outEnv names the file the recorder appends samples to.
const outEnv = "GITFLEET_GITLEAKS_SAMPLES_OUT"

// recorder replaces cmd/generate/config/utils/validate.go. It keeps the one
// side effect of the original on the rule, lower-casing and de-duplicating
// its keywords, so that the generated configuration stays gitleaks' own
// (Extract checks it).
const recorder = `package utils

import (
	"encoding/json"
	"os"
	"strings"

	"github.com/zricethezav/gitleaks/v8/config"
)

func Validate(r config.Rule, tps, fps []string) *config.Rule {
	for _, s := range tps {
		record(r.RuleID, true, "", s)
	}
	for _, s := range fps {
		record(r.RuleID, false, "", s)
	}
	return normalized(r)
}

func ValidateWithPaths(r config.Rule, tps, fps map[string]string) *config.Rule {
	for p, s := range tps {
		record(r.RuleID, true, p, s)
	}
	for p, s := range fps {
		record(r.RuleID, false, p, s)
	}
	return normalized(r)
}

func normalized(r config.Rule) *config.Rule {
	seen := map[string]bool{}
	var kws []string
	for _, k := range r.Keywords {
		if k = strings.ToLower(k); !seen[k] {
			seen[k] = true
			kws = append(kws, k)
		}
	}
	r.Keywords = kws
	return &r
}

func record(rule string, isTrue bool, path, text string) {
	f, err := os.OpenFile(os.Getenv("` + outEnv + `"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err == nil {
		err = json.NewEncoder(f).Encode(map[string]any{"rule": rule, "true": isTrue, "path": path, "text": text})
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		panic(err)
	}
}
`

// cacheFormat changes when the recorder or Sample does, so that an older
// cached extraction is not read as a current one.
const cacheFormat = "v1"

// CachePath is where Load keeps the extraction of version.
func CachePath(version string) (string, error) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, "gitfleet", "gitleaks-samples", version+"."+cacheFormat+".jsonl"), nil
}

// Load returns the samples of gitleaks version (e.g. "v8.30.1"): the cached
// extraction if there is one, otherwise a new one, which it caches.
func Load(ctx context.Context, version string) ([]Sample, error) {
	path, err := CachePath(version)
	if err != nil {
		return nil, err
	}
	if data, err := os.ReadFile(path); err == nil {
		if ss, err := parse(data); err == nil && len(ss) > 0 {
			return ss, nil
		}
		// A damaged cache is drawn again rather than trusted.
	}
	data, err := extract(ctx, version)
	if err != nil {
		return nil, err
	}
	ss, err := parse(data)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	// Written aside and renamed, so that a concurrent Load reads either no
	// file or a whole one.
	tmp, err := os.CreateTemp(filepath.Dir(path), ".extract-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return nil, err
	}
	if err := tmp.Close(); err != nil {
		return nil, err
	}
	return ss, os.Rename(tmp.Name(), path)
}

// Extract builds and runs gitleaks version's generator and returns the
// samples its rules are validated with. Each call draws new random samples.
// It needs the go command and the Go module proxy (or the modules in the
// module cache).
func Extract(ctx context.Context, version string) ([]Sample, error) {
	data, err := extract(ctx, version)
	if err != nil {
		return nil, err
	}
	return parse(data)
}

func extract(ctx context.Context, version string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "gitleakssamples-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	// The throwaway module requires gitleaks and lists the generator as its
	// tool, so that `go mod vendor` vendors the generator's packages.
	gomod := fmt.Sprintf("module gitleakssamples.generator\n\ngo 1.24\n\nrequire %s %s\n\ntool %s\n", Module, version, generator)
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(gomod), 0o644); err != nil {
		return nil, err
	}
	goCmd := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		// GOWORK=off: a go.work above the temp dir must not adopt it.
		cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GOWORK=off")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go %v: %v\n%s", args, err, stderr.Bytes())
		}
		return out, nil
	}

	out, err := goCmd("mod", "download", "-json", Module+"@"+version)
	if err != nil {
		return nil, err
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		return nil, fmt.Errorf("go mod download %s@%s: no module directory in %q (%v)", Module, version, out, err)
	}
	if _, err := goCmd("mod", "tidy"); err != nil {
		return nil, err
	}
	if _, err := goCmd("mod", "vendor"); err != nil {
		return nil, err
	}

	vendored := filepath.Join(dir, "vendor", filepath.FromSlash(generator), "utils", "validate.go")
	if _, err := os.Stat(vendored); err != nil {
		// Without it the overlay would add a file beside the original and
		// the build fail on duplicate functions: say what changed instead.
		return nil, fmt.Errorf("gitleaks %s has no %s/utils/validate.go to replace: %w", version, generator, err)
	}
	rec := filepath.Join(dir, "recorder", "validate.go")
	if err := os.MkdirAll(filepath.Dir(rec), 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(rec, []byte(recorder), 0o644); err != nil {
		return nil, err
	}
	overlay, err := json.Marshal(map[string]map[string]string{"Replace": {vendored: rec}})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "overlay.json"), overlay, 0o644); err != nil {
		return nil, err
	}
	bin := filepath.Join(dir, "generate")
	if _, err := goCmd("build", "-mod=vendor", "-overlay", filepath.Join(dir, "overlay.json"), "-o", bin, generator); err != nil {
		return nil, err
	}

	samples := filepath.Join(dir, "samples.jsonl")
	generated := filepath.Join(dir, "gitleaks.toml")
	cmd := exec.CommandContext(ctx, bin, generated)
	// The generator reads its template relative to its own directory.
	cmd.Dir = filepath.Join(mod.Dir, filepath.FromSlash("cmd/generate/config"))
	cmd.Env = append(os.Environ(), outEnv+"="+samples)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("gitleaks %s generator: %v\n%s", version, err, out)
	}

	got, err := os.ReadFile(generated)
	if err != nil {
		return nil, err
	}
	shipped, err := os.ReadFile(filepath.Join(mod.Dir, "config", "gitleaks.toml"))
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(got, shipped) {
		return nil, fmt.Errorf("gitleaks %s: the generator built with the recorder does not generate the config/gitleaks.toml the release ships, so its samples are not those of that configuration", version)
	}
	return os.ReadFile(samples)
}

func parse(data []byte) ([]Sample, error) {
	var ss []Sample
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 16<<20)
	for sc.Scan() {
		var s Sample
		if err := json.Unmarshal(sc.Bytes(), &s); err != nil {
			return nil, fmt.Errorf("sample %d: %w", len(ss)+1, err)
		}
		if s.Rule == "" {
			return nil, fmt.Errorf("sample %d has no rule", len(ss)+1)
		}
		ss = append(ss, s)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(ss) == 0 {
		return nil, errors.New("the generator recorded no samples")
	}
	return ss, nil
}
