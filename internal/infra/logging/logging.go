package logging

import (
	"fmt"
	"os"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// New returns a logger writing to stderr: JSON for machines (format
// "json"), or a console encoding for people. level is debug, info, warn or
// error.
func New(level, format string) (*zap.Logger, error) {
	lvl, err := zapcore.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	var enc zapcore.Encoder
	switch format {
	case "json":
		cfg := zap.NewProductionEncoderConfig()
		cfg.EncodeTime = zapcore.ISO8601TimeEncoder
		enc = zapcore.NewJSONEncoder(cfg)
	case "console", "":
		cfg := zap.NewDevelopmentEncoderConfig()
		cfg.EncodeTime = zapcore.TimeEncoderOfLayout("15:04:05.000")
		enc = zapcore.NewConsoleEncoder(cfg)
	default:
		return nil, fmt.Errorf("log format %q: want json or console", format)
	}
	return zap.New(zapcore.NewCore(enc, zapcore.Lock(os.Stderr), lvl)), nil
}

// Temporal adapts a zap logger to the SDK's logger interface.
func Temporal(z *zap.Logger) log.Logger {
	return temporalLogger{z.WithOptions(zap.AddCallerSkip(1)).Sugar()}
}

type temporalLogger struct{ s *zap.SugaredLogger }

func (l temporalLogger) Debug(msg string, keyvals ...any) { l.s.Debugw(msg, keyvals...) }
func (l temporalLogger) Info(msg string, keyvals ...any)  { l.s.Infow(msg, keyvals...) }
func (l temporalLogger) Warn(msg string, keyvals ...any)  { l.s.Warnw(msg, keyvals...) }
func (l temporalLogger) Error(msg string, keyvals ...any) { l.s.Errorw(msg, keyvals...) }

// With makes the SDK's contextual fields (workflow id, activity type…)
// structured zap fields.
func (l temporalLogger) With(keyvals ...any) log.Logger { return temporalLogger{l.s.With(keyvals...)} }
