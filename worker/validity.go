package main

import (
	"os"

	"go.uber.org/zap"

	"gitfleet/internal/infra/validate"
	"gitfleet/workflows"
)

// validityChecker is the worker's one Checker (its limits hold for all its
// activities), from GITFLEET_VALIDATE and its per-provider settings; off
// unless GITFLEET_VALIDATE=on.
func validityChecker(log *zap.Logger) (*validate.Checker, error) {
	s, err := validate.FromEnv(os.Getenv)
	if err != nil {
		return nil, err
	}
	c, err := validate.New(s)
	if err != nil {
		return nil, err
	}
	workflows.SetValidateAfterScan(len(s.EnabledProviders()) > 0)
	if s.On {
		log.Info("validity checks on: found secrets are sent to their providers", zap.Strings("providers", s.EnabledProviders()),
			zap.Int("inFlight", c.Settings().InFlight), zap.Int("perMinute", c.Settings().PerMinute))
	}
	return c, nil
}
