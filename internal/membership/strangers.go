package membership

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// strangerLines are memberlist's log lines about a connection that does
// not speak gossip (a port scan, a client pointed at the gossip port). One
// per connection at ERROR flooded the log: 500 connections, 507 lines.
var strangerLines = []string{"Received invalid msgType", "Failed to decode", "Unknown message type"}

// strangerFilter passes memberlist's log lines on to out, except those
// about strangers, which it logs at WARN at most once per interval with
// the number it left out.
type strangerFilter struct {
	out      io.Writer
	log      *slog.Logger
	interval time.Duration

	mu      sync.Mutex
	last    time.Time // REQUIRES: mu
	dropped int       // REQUIRES: mu
}

func (f *strangerFilter) Write(p []byte) (int, error) {
	line := string(p)
	stranger := false
	for _, s := range strangerLines {
		if strings.Contains(line, s) {
			stranger = true
			break
		}
	}
	if !stranger {
		return f.out.Write(p)
	}
	f.mu.Lock()
	now := time.Now()
	if !f.last.IsZero() && now.Sub(f.last) < f.interval {
		f.dropped++
		f.mu.Unlock()
		return len(p), nil
	}
	dropped := f.dropped
	f.last, f.dropped = now, 0
	f.mu.Unlock()
	msg := strings.TrimSpace(line)
	if i := strings.Index(msg, "] "); i >= 0 && strings.HasPrefix(msg, "[") {
		msg = msg[i+2:]
	}
	f.log.Warn("gossip port: a connection that does not speak gossip", "detail", msg, "similar_lines_left_out", dropped, "logged_at_most_every", f.interval)
	return len(p), nil
}
