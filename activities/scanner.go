package activities

import (
	"gitfleet/internal/domain/scan"
	"gitfleet/internal/infra/config"
)

// NewScanner builds the scanner: the rules of a gitleaks-format file (""
// means the default rule set) and the findings' key, which hashes secrets
// and keys the digests of names in logs and errors. The key comes from
// the worker's configuration, never from the database that holds the
// hashes (architecture §11).
func NewScanner(rulesFile string, key config.FindingKey) (*scan.Scanner, error) {
	var rules *scan.RuleSet
	var err error
	if rulesFile != "" {
		rules, err = scan.LoadFile(rulesFile)
	} else {
		rules, err = scan.Default()
	}
	if err != nil {
		return nil, err
	}
	s, err := scan.New(rules, scan.DefaultConfig(), key.Secret)
	if err != nil {
		return nil, err
	}
	return s.WithKeyVersion(key.Version)
}
