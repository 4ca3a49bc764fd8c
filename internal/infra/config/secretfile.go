package config

import (
	"fmt"
	"net/url"
	"os"
	"strings"
)

// Secrets a deployment may give as files: VAR_FILE names a file that holds
// VAR's value. Compose and Kubernetes hand secrets over as files; a value
// in the environment shows in `docker inspect` and in the process's
// environment, which every process of its user may read. The findings'
// key has a file setting of its own (GITFLEET_FINDING_KEY_FILE, read by
// FindingKey), and DATABASE_PASSWORD_FILE gives DATABASE_URL's password
// alone, so that the URL itself need not be a secret.
// The table marks them (FileForm).
var SecretFileVars = func() []string {
	var out []string
	for _, s := range settings {
		if s.FileForm {
			out = append(out, s.Name)
		}
	}
	return out
}()

// EnvDatabasePasswordFile names a file holding the password of
// DATABASE_URL's user, for a URL that carries none.
const EnvDatabasePasswordFile = "DATABASE_PASSWORD_FILE"

// FileVar is the setting that names the file holding v's value.
func FileVar(v string) string { return v + "_FILE" }

// readSecretFile reads the secret in the file setting names: its content
// without surrounding white space (a trailing newline); an empty file is
// an unset secret, as an empty variable is (compose makes an optional
// secret left empty an empty file). Errors name the setting and the file,
// never the content.
func readSecretFile(setting, path string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", setting, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// withSecretFiles returns getenv with each of SecretFileVars taken from
// the file its VAR_FILE names; setting both is an error.
func withSecretFiles(getenv func(string) string) (func(string) string, error) {
	fromFiles := map[string]string{}
	for _, v := range SecretFileVars {
		path := getenv(FileVar(v))
		if path == "" {
			continue
		}
		if getenv(v) != "" {
			return nil, fmt.Errorf("%s and %s are both set: set one", v, FileVar(v))
		}
		s, err := readSecretFile(FileVar(v), path)
		if err != nil {
			return nil, err
		}
		fromFiles[v] = s
	}
	return func(k string) string {
		if s, ok := fromFiles[k]; ok {
			return s
		}
		return getenv(k)
	}, nil
}

// withDatabasePassword puts the password in the file passwordFile names
// ("" : none) into dbURL, which must carry none.
func withDatabasePassword(dbURL, passwordFile string) (string, error) {
	if passwordFile == "" {
		return dbURL, nil
	}
	u, err := url.Parse(dbURL)
	if err != nil || u.User == nil || u.User.Username() == "" {
		return "", fmt.Errorf("%s is set: %s must be a URL that names the user (postgres://USER@HOST/DB)", EnvDatabasePasswordFile, EnvDatabaseURL)
	}
	if _, has := u.User.Password(); has {
		return "", fmt.Errorf("%s is set, and %s carries a password too: set one", EnvDatabasePasswordFile, EnvDatabaseURL)
	}
	pw, err := readSecretFile(EnvDatabasePasswordFile, passwordFile)
	if err != nil {
		return "", err
	}
	if pw == "" {
		return "", fmt.Errorf("%s: %s is empty", EnvDatabasePasswordFile, passwordFile)
	}
	u.User = url.UserPassword(u.User.Username(), pw)
	return u.String(), nil
}
