package config

import (
	"fmt"
	"strconv"
)

// GitHub code scanning (architecture §8, "Where developers look: code
// scanning").
const (
	// EnvCodeScanning: "on" uploads each collected repository's SARIF to
	// GitHub code scanning when its open secrets or their resolutions
	// changed (the App needs Code scanning alerts: write); off by default.
	EnvCodeScanning = "GITFLEET_CODE_SCANNING"
	// EnvCodeScanningPerHour bounds the uploads sent per App installation
	// (per account) in any hour, all workers together.
	EnvCodeScanningPerHour = "GITFLEET_CODE_SCANNING_PER_HOUR"
)

// DefaultCodeScanningPerHour is EnvCodeScanningPerHour's default: well
// under what an installation's API budget takes (5,000 requests an hour;
// an upload costs a mint, a post and a few polls).
const DefaultCodeScanningPerHour = 100

// CodeScanning is the code scanning upload's settings.
type CodeScanning struct {
	On      bool
	PerHour int
}

func loadCodeScanning(getenv func(string) string) (CodeScanning, error) {
	var c CodeScanning
	switch v := value(getenv, EnvCodeScanning); v {
	case "off":
	case "on":
		c.On = true
	default:
		return c, fmt.Errorf("%s=%q: want on or off", EnvCodeScanning, v)
	}
	if v := value(getenv, EnvCodeScanningPerHour); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return c, fmt.Errorf("%s=%q: want a number of uploads, at least 1", EnvCodeScanningPerHour, v)
		}
		c.PerHour = n
	}
	return c, nil
}
