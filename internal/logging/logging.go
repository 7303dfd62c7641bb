// Package logging adapts the loggers of the libraries Causeway embeds
// (hashicorp/raft's hclog, memberlist's *log.Logger) to log/slog.
package logging

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/hashicorp/go-hclog"
)

// HCLog returns an hclog.Logger that writes to logger. Records below level
// are dropped.
func HCLog(logger *slog.Logger, name string, level hclog.Level) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{
		Name:            name,
		Level:           level,
		Output:          &writer{log: logger},
		DisableTime:     true,
		IncludeLocation: false,
	})
}

// Writer returns an io.Writer that logs each line written to it at the
// level found in its "[LEVEL]" tag (info when absent).
func Writer(logger *slog.Logger) io.Writer { return &writer{log: logger} }

type writer struct{ log *slog.Logger }

func (w *writer) Write(p []byte) (int, error) {
	for _, line := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		msg := strings.TrimSpace(string(line))
		level := slog.LevelInfo
		for tag, l := range map[string]slog.Level{"[ERROR]": slog.LevelError, "[WARN]": slog.LevelWarn, "[DEBUG]": slog.LevelDebug, "[TRACE]": slog.LevelDebug, "[INFO]": slog.LevelInfo, "[ERR]": slog.LevelError} {
			if i := strings.Index(msg, tag); i >= 0 {
				level = l
				msg = strings.TrimSpace(msg[i+len(tag):])
				break
			}
		}
		w.log.Log(context.Background(), level, msg)
	}
	return len(p), nil
}
