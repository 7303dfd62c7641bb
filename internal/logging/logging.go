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
		w.log.Log(context.Background(), routineLevel(level, msg), msg)
	}
	return len(p), nil
}

// raftPeerFailures are the messages hashicorp/raft logs at ERROR when a
// leader fails to replicate to a peer. Whether that is an error depends on
// why: see routineLevel.
var raftPeerFailures = []string{
	"raft: failed to appendEntries to",
	"raft: failed to heartbeat to",
	"raft: failed to pipeline appendEntries",
	"raft: failed to start pipeline replication to",
	"raft: failed to send snapshot to",
	"raft: failed to make requestVote RPC",
}

// peerAway are the causes of a replication failure that mean the peer is
// down, restarting, or has not opened the group yet (a node that stops,
// starts again or is being added): routine in a rolling restart, and the
// leader goes on retrying.
var peerAway = []string{
	"code = Unavailable",
	"unknown raft group",
	"transport: closed",
	"append pipeline closed",
	"connection refused",
}

// routineLevel returns the level to log msg at, given the level its
// library gave it: raft's ERROR records of routine, expected conditions
// are lowered. A leader that learns of a newer term steps down, as raft
// means it to (info); a leader or candidate that cannot reach a peer that
// is down or restarting retries until it is back (warn: a peer away for
// long shows in kvctl cluster members and the unreachable-node metrics);
// memberlist's sends on the sockets its own shutdown closed (info). Every
// other record keeps its level.
func routineLevel(level slog.Level, msg string) slog.Level {
	if level != slog.LevelError {
		return level
	}
	if strings.HasPrefix(msg, "raft: peer has newer term") {
		return slog.LevelInfo
	}
	// memberlist's sends that race its own shutdown, as the node stops.
	if strings.HasPrefix(msg, "memberlist:") && strings.Contains(msg, "use of closed network connection") {
		return slog.LevelInfo
	}
	for _, f := range raftPeerFailures {
		if !strings.HasPrefix(msg, f) {
			continue
		}
		for _, cause := range peerAway {
			if strings.Contains(msg, cause) {
				return slog.LevelWarn
			}
		}
	}
	return level
}
