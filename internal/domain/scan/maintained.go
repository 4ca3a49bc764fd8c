package scan

import (
	"runtime/debug"

	gitleaksconfig "github.com/zricethezav/gitleaks/v8/config"
)

// The maintained rule set is gitleaks' default configuration, taken from
// the gitleaks module that go.mod pins (its package config embeds the file
// gitleaks generates and tests its rules against); its text is never
// copied into this repository. Upgrading the pin upgrades the rules, and
// the policy hash with them: every scope is then scanned again.
//
// Importing the package costs its dependencies (viper and its encoders,
// zerolog): docs/architecture.md §8 has the measurement and why this is
// still the lightest honest way to depend on the file.
var maintainedTOML = []byte(gitleaksconfig.DefaultConfig)

// gitleaksModule is the module the maintained rules come from.
const gitleaksModule = "github.com/zricethezav/gitleaks/v8"

// MaintainedVersion is the version of the gitleaks module this binary was
// built with: the version of the maintained rules. It is GitleaksVersion
// when the binary carries no module information.
func MaintainedVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == gitleaksModule {
				if d.Replace != nil && d.Replace.Version != "" {
					return d.Replace.Version
				}
				return d.Version
			}
		}
	}
	return GitleaksVersion
}
