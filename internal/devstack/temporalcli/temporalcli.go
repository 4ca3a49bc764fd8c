package temporalcli

import (
	"context"
	"debug/buildinfo"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Version is the pinned Temporal CLI version.
const Version = "1.5.1"

// InstallCommand installs the pinned Temporal CLI into $(go env GOPATH)/bin.
const InstallCommand = "go install github.com/temporalio/cli/cmd/temporal@v" + Version

// modulePath is the Go module the CLI is built from.
const modulePath = "github.com/temporalio/cli"

// Find returns the path of the Temporal CLI. It looks at $TEMPORAL_CLI (which,
// when set, must name an executable), then `temporal` on PATH, then
// $GOBIN/temporal and <GOPATH>/bin/temporal (GOPATH being $GOPATH or ~/go,
// and only as a last resort `go env GOPATH`). The error says how to install
// it.
func Find() (string, error) {
	if p := os.Getenv("TEMPORAL_CLI"); p != "" {
		if err := checkExecutable(p); err != nil {
			return "", fmt.Errorf("temporalcli: $TEMPORAL_CLI=%q: %v; point it at the temporal CLI binary or unset it (install v%s with: %s)",
				p, err, Version, InstallCommand)
		}
		return p, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	var tried []string
	try := func(dir string) string {
		if dir == "" {
			return ""
		}
		p := filepath.Join(dir, "temporal")
		for _, t := range tried {
			if t == p {
				return ""
			}
		}
		tried = append(tried, p)
		if checkExecutable(p) == nil {
			return p
		}
		return ""
	}
	for _, dir := range goBinDirs() {
		if p := try(dir); p != "" {
			return p, nil
		}
	}
	// Last resort: ask the go command (GOBIN/GOPATH may be set in go env's
	// config file rather than in the environment).
	if gobin, gopath := goEnv(); gobin != "" || gopath != "" {
		if p := try(gobin); p != "" {
			return p, nil
		}
		for _, dir := range filepath.SplitList(gopath) {
			if p := try(filepath.Join(dir, "bin")); p != "" {
				return p, nil
			}
		}
	}
	where := "PATH"
	if len(tried) > 0 {
		where += ", " + strings.Join(tried, ", ")
	}
	return "", fmt.Errorf("temporalcli: the Temporal CLI (temporal) was not found (looked at $TEMPORAL_CLI, %s); install v%s with: %s",
		where, Version, InstallCommand)
}

// goBinDirs returns the directories `go install` puts binaries in, computed
// from the environment without running the go command.
func goBinDirs() []string {
	var dirs []string
	if gobin := os.Getenv("GOBIN"); gobin != "" {
		dirs = append(dirs, gobin)
	}
	if gopath := os.Getenv("GOPATH"); gopath != "" {
		for _, dir := range filepath.SplitList(gopath) {
			if dir != "" {
				dirs = append(dirs, filepath.Join(dir, "bin"))
			}
		}
	} else if home, err := os.UserHomeDir(); err == nil && home != "" {
		dirs = append(dirs, filepath.Join(home, "go", "bin"))
	}
	return dirs
}

func goEnv() (gobin, gopath string) {
	goCmd, err := exec.LookPath("go")
	if err != nil {
		return "", ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, goCmd, "env", "GOBIN", "GOPATH").Output()
	if err != nil {
		return "", ""
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != 2 {
		return "", ""
	}
	return strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
}

func checkExecutable(p string) error {
	st, err := os.Stat(p)
	if err != nil {
		return err
	}
	if st.IsDir() {
		return errors.New("is a directory")
	}
	if st.Mode().Perm()&0o111 == 0 {
		return errors.New("is not executable")
	}
	return nil
}

var versionRE = regexp.MustCompile(`(?m)^temporal version v?(\S+)`)

// InstalledVersion reports the version of the Temporal CLI at path, without
// a leading "v" (e.g. "1.5.1"). It prefers the Go build information embedded
// in the binary, because a CLI built with `go install` reports
// "0.0.0-DEV" from `temporal --version`; it falls back to parsing
// `temporal --version` (release binaries).
func InstalledVersion(ctx context.Context, path string) (string, error) {
	if bi, err := buildinfo.ReadFile(path); err == nil && bi.Main.Path == modulePath {
		if v := strings.TrimPrefix(bi.Main.Version, "v"); v != "" && v != "(devel)" {
			return v, nil
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("temporalcli: %s --version: %w: %s", path, err, strings.TrimSpace(string(out)))
	}
	if m := versionRE.FindSubmatch(out); m != nil {
		return string(m[1]), nil
	}
	return "", fmt.Errorf("temporalcli: cannot parse the output of %s --version: %q", path, strings.TrimSpace(string(out)))
}
