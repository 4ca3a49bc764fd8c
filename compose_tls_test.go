package gitfleet

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/types"

	"gitfleet/internal/infra/config"
)

// temporalClients are the services that dial Temporal with a client
// certificate of their own, by the gitfleet-pki volume that holds it.
var temporalClients = map[string]string{"worker": "pki-worker", "starter": "pki-starter", "runner": "pki-runner"}

// mountOf is the volume service mounts at target, and whether read-only.
func mountOf(s types.ServiceConfig, target string) (source string, readOnly bool) {
	for _, v := range s.Volumes {
		if v.Target == target {
			return v.Source, v.ReadOnly
		}
	}
	return "", false
}

// mountersOf lists the services that mount volume.
func mountersOf(p *types.Project, volume string) []string {
	var out []string
	for name, s := range p.Services {
		for _, v := range s.Volumes {
			if v.Type == types.VolumeTypeVolume && v.Source == volume {
				out = append(out, name)
			}
		}
	}
	slices.Sort(out)
	return out
}

// Temporal requires a client certificate from gitfleet-pki's CA (mTLS),
// on its frontend and between its nodes; each role dials it with its own
// certificate, on a volume only that role mounts, and the CA's key is on a
// volume only the certificate job mounts. docs/architecture.md §11 says
// what this does not limit (no per-queue permission in the stock server).
func TestComposeTemporalMTLS(t *testing.T) {
	p := composeProject(t)
	srv := p.Services["temporal"]
	for k, want := range map[string]string{
		"TEMPORAL_TLS_REQUIRE_CLIENT_AUTH":   "true",
		"TEMPORAL_TLS_SERVER_CERT":           "/etc/temporal/tls/temporal.pem",
		"TEMPORAL_TLS_SERVER_KEY":            "/etc/temporal/tls/temporal-key.pem",
		"TEMPORAL_TLS_SERVER_CA_CERT":        "/etc/temporal/tls/ca.pem",
		"TEMPORAL_TLS_FRONTEND_CERT":         "/etc/temporal/tls/temporal.pem",
		"TEMPORAL_TLS_FRONTEND_KEY":          "/etc/temporal/tls/temporal-key.pem",
		"TEMPORAL_TLS_CLIENT1_CA_CERT":       "/etc/temporal/tls/ca.pem",
		"TEMPORAL_TLS_INTERNODE_SERVER_NAME": "temporal",
		"TEMPORAL_TLS_FRONTEND_SERVER_NAME":  "temporal",
	} {
		if v := srv.Environment[k]; v == nil || *v != want {
			t.Errorf("temporal: %s = %v, want %q", k, v, want)
		}
	}
	if src, ro := mountOf(srv, "/etc/temporal/tls"); src != "pki-temporal" || !ro {
		t.Errorf("temporal: /etc/temporal/tls is %q (read-only %t), want pki-temporal read-only", src, ro)
	}
	// The admin certificate: the health check, the setup job, the UI.
	health := strings.Join(srv.HealthCheck.Test, " ")
	setup := p.Services["temporal-setup"]
	adminTLS := setup.Environment["TEMPORAL_ADMIN_TLS"]
	if adminTLS == nil || !strings.Contains(strings.Join(setup.Command, " "), "$TEMPORAL_ADMIN_TLS") {
		t.Errorf("temporal-setup: its temporal commands do not take TEMPORAL_ADMIN_TLS (%v)", adminTLS)
	}
	for _, flags := range []string{health, *adminTLS} {
		for _, want := range []string{"--tls-cert-path /etc/temporal/admin/client.pem", "--tls-key-path /etc/temporal/admin/client-key.pem",
			"--tls-ca-path /etc/temporal/admin/ca.pem", "--tls-server-name temporal"} {
			if !strings.Contains(flags, want) {
				t.Errorf("%q lacks %q", flags, want)
			}
		}
	}
	ui := p.Services["temporal-ui"]
	for _, k := range []string{"TEMPORAL_TLS_CA", "TEMPORAL_TLS_CERT", "TEMPORAL_TLS_KEY"} {
		if v := ui.Environment[k]; v == nil || !strings.HasPrefix(*v, "/etc/temporal/admin/") {
			t.Errorf("temporal-ui: %s = %v, want the admin certificate's", k, v)
		}
	}
	if got := mountersOf(p, "pki-admin"); !slices.Equal(got, []string{"gitfleet-pki", "temporal", "temporal-setup", "temporal-ui"}) {
		t.Errorf("pki-admin (the admin certificate) is mounted by %v", got)
	}
	if got := mountersOf(p, "pki-ca"); !slices.Equal(got, []string{"gitfleet-pki"}) {
		t.Errorf("pki-ca (the CA's key) is mounted by %v, want the certificate job only", got)
	}
	for name, volume := range temporalClients {
		s := p.Services[name]
		if got := mountersOf(p, volume); !slices.Equal(got, []string{"gitfleet-pki", name}) {
			t.Errorf("%s (%s's certificate) is mounted by %v", volume, name, got)
		}
		if src, ro := mountOf(s, "/etc/gitfleet/tls"); src != volume || !ro {
			t.Errorf("%s: /etc/gitfleet/tls is %q (read-only %t), want %s read-only", name, src, ro, volume)
		}
		cfg, err := config.Load(func(k string) string {
			if v := s.Environment[k]; v != nil && !strings.HasSuffix(k, "_FILE") {
				return *v
			}
			return ""
		})
		if err != nil {
			t.Fatal(err)
		}
		tls := cfg.Temporal.TLS
		if tls == nil || tls.Disabled || tls.ClientCertPath != "/etc/gitfleet/tls/client.pem" || tls.ClientKeyPath != "/etc/gitfleet/tls/client-key.pem" ||
			tls.ServerCACertPath != "/etc/gitfleet/tls/ca.pem" || tls.ServerName != "temporal" || tls.DisableHostVerification {
			t.Errorf("%s: Temporal TLS %+v, want its own client certificate, the CA, server name temporal", name, tls)
		}
	}
}

// The registry: workers push with gitfleet-push to `registry`; runners and
// the starter pull with gitfleet-pull from `registry-pull`, which serves
// the same storage read-only and is `registry` on the pull network, the
// only network they are on. distribution cannot split push from pull per
// user without a token server: two registries are how this file does it.
func TestComposeRegistryRoles(t *testing.T) {
	p := composeProject(t)
	push, pull := p.Services["registry"], p.Services["registry-pull"]
	for name, want := range map[string]string{"registry": "/etc/registry/htpasswd-push", "registry-pull": "/etc/registry/htpasswd-pull"} {
		env := p.Services[name].Environment
		for k, v := range map[string]string{"REGISTRY_AUTH": "htpasswd", "REGISTRY_AUTH_HTPASSWD_PATH": want,
			"REGISTRY_HTTP_TLS_CERTIFICATE": "/etc/registry/registry.pem", "REGISTRY_HTTP_TLS_KEY": "/etc/registry/registry-key.pem"} {
			if got := env[k]; got == nil || *got != v {
				t.Errorf("%s: %s = %v, want %q", name, k, got, v)
			}
		}
		if src, ro := mountOf(p.Services[name], "/etc/registry"); src != "pki-registry" || !ro {
			t.Errorf("%s: /etc/registry is %q (read-only %t)", name, src, ro)
		}
	}
	if src, ro := mountOf(push, "/var/lib/registry"); src != "registry" || ro {
		t.Errorf("registry: storage %q read-only %t, want the registry volume, writable", src, ro)
	}
	if src, ro := mountOf(pull, "/var/lib/registry"); src != "registry" || !ro {
		t.Errorf("registry-pull: storage %q read-only %t, want the same volume, read-only", src, ro)
	}
	if v := pull.Environment["REGISTRY_STORAGE_MAINTENANCE_READONLY"]; v == nil || *v != "enabled: true" {
		t.Errorf("registry-pull: maintenance read-only %v, want \"enabled: true\"", v)
	}
	if n, ok := pull.Networks["pull"]; !ok || n == nil || !slices.Contains(n.Aliases, "registry") || len(pull.Networks) != 1 {
		t.Errorf("registry-pull: networks %v, want pull only, as registry", pull.Networks)
	}
	onlyPull := func(name string) bool {
		_, on := p.Services[name].Networks["pull"]
		return on && len(p.Services[name].Networks) == 1
	}
	for _, name := range []string{"runner", "starter"} {
		if !onlyPull(name) {
			t.Errorf("%s: networks %v, want pull only (the registry that takes pushes is out of its reach)", name, p.Services[name].Networks)
		}
	}
	for _, name := range []string{"worker", "registry"} {
		if _, on := p.Services[name].Networks["pull"]; on {
			t.Errorf("%s is on the pull network: `registry` would name two services there", name)
		}
	}
	for _, name := range []string{"temporal", "gitfleet-db"} {
		if _, on := p.Services[name].Networks["pull"]; !on {
			t.Errorf("%s is not on the pull network: runners and the starter cannot reach it", name)
		}
	}
	// Each gitfleet service reads its own keychain and trusts the CA.
	for name := range temporalClients {
		env := p.Services[name].Environment
		if v := env["DOCKER_CONFIG"]; v == nil || *v != "/etc/gitfleet/tls/docker" {
			t.Errorf("%s: DOCKER_CONFIG %v, want its volume's keychain", name, v)
		}
		if v := env["SSL_CERT_DIR"]; v == nil || *v != "/etc/gitfleet/tls/trust" {
			t.Errorf("%s: SSL_CERT_DIR %v, want the CA's directory", name, v)
		}
		if v := env[config.EnvInsecure]; v == nil || *v != "" {
			t.Errorf("%s: %s = %v: the registries serve TLS", name, config.EnvInsecure, v)
		}
	}
}

// make-pki.sh, run for real (openssl; htpasswd stubbed: it only writes the
// user and a hash of the password): every certificate chains to the CA
// with its name and usage, each role's keychain holds its own registry
// user (push for workers, pull for runners and the starter), each
// registry's htpasswd its one user, and a second run changes nothing.
func TestPKIScript(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is needed (the gitfleet-pki job runs it): ", err)
	}
	dir, bin := t.TempDir(), t.TempDir()
	stub := "#!/bin/sh\n# htpasswd -Bbn USER PASSWORD\nprintf '%s:stub-%s\\n' \"$2\" \"$3\"\n"
	if err := os.WriteFile(filepath.Join(bin, "htpasswd"), []byte(stub), 0o755); err != nil {
		t.Fatal(err)
	}
	run := func() {
		t.Helper()
		cmd := exec.Command("sh", "deploy/pki/make-pki.sh")
		cmd.Env = append(os.Environ(), "GITFLEET_PKI_DIR="+dir, "PATH="+bin+":"+filepath.Dir(openssl)+":/usr/bin:/bin")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("make-pki.sh: %v\n%s", err, out)
		}
	}
	run()
	read := func(rel string) []byte {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cert := func(rel string) *x509.Certificate {
		t.Helper()
		b, _ := pem.Decode(read(rel))
		if b == nil {
			t.Fatalf("%s: no PEM", rel)
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert("ca/ca.pem"))
	for _, tc := range []struct {
		file, name string
		usage      []x509.ExtKeyUsage
	}{
		{"temporal/temporal.pem", "temporal", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}},
		{"registry/registry.pem", "registry", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}},
		{"admin/client.pem", "gitfleet-admin", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"worker/client.pem", "gitfleet-worker", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"starter/client.pem", "gitfleet-starter", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
		{"runner/client.pem", "gitfleet-runner", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}},
	} {
		c := cert(tc.file)
		for _, u := range tc.usage {
			if _, err := c.Verify(x509.VerifyOptions{Roots: roots, DNSName: tc.name, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
				t.Errorf("%s for %s (usage %v): %v", tc.file, tc.name, u, err)
			}
		}
		if !slices.Equal(c.ExtKeyUsage, tc.usage) || c.IsCA {
			t.Errorf("%s: usages %v (CA %t), want %v only", tc.file, c.ExtKeyUsage, c.IsCA, tc.usage)
		}
		role := filepath.Dir(tc.file)
		if !slices.Equal(read(role+"/ca.pem"), read("ca/ca.pem")) || !slices.Equal(read(role+"/trust/ca.pem"), read("ca/ca.pem")) {
			t.Errorf("%s: the CA is not beside the certificate", role)
		}
		if _, err := os.Stat(filepath.Join(dir, role, "ca-key.pem")); err == nil {
			t.Errorf("%s holds the CA's key", role)
		}
	}
	user := func(role string) (name, password string) {
		t.Helper()
		var c struct {
			Auths map[string]struct{ Auth string } `json:"auths"`
		}
		if err := json.Unmarshal(read(role+"/docker/config.json"), &c); err != nil {
			t.Fatal(err)
		}
		b, err := base64.StdEncoding.DecodeString(c.Auths["registry:5000"].Auth)
		if err != nil {
			t.Fatal(err)
		}
		name, password, _ = strings.Cut(string(b), ":")
		return name, password
	}
	pushUser, pushPW := user("worker")
	for role, want := range map[string]string{"worker": "gitfleet-push", "runner": "gitfleet-pull", "starter": "gitfleet-pull"} {
		if name, pw := user(role); name != want || len(pw) < 32 {
			t.Errorf("%s's keychain: user %q (password of %d characters), want %s", role, name, len(pw), want)
		}
	}
	if _, pullPW := user("runner"); pullPW == pushPW {
		t.Error("the pull and push users share a password")
	}
	for file, want := range map[string]string{"registry/htpasswd-push": pushUser + ":stub-" + pushPW + "\n"} {
		if got := string(read(file)); got != want {
			t.Errorf("%s = %q, want %q", file, got, want)
		}
	}
	if got := string(read("registry/htpasswd-pull")); !strings.HasPrefix(got, "gitfleet-pull:") || strings.Count(got, "\n") != 1 {
		t.Errorf("registry/htpasswd-pull = %q, want gitfleet-pull alone", got)
	}
	before := read("worker/client.pem")
	run()
	if !slices.Equal(read("worker/client.pem"), before) {
		t.Error("a second run reissued the worker's certificate")
	}
	if name, pw := user("worker"); name != pushUser || pw != pushPW {
		t.Error("a second run changed the push password")
	}
}
