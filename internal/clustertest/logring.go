package clustertest

import (
	"strings"
	"sync"
	"testing"
)

// logRing keeps the last lines the nodes of a test site logged, so that
// a failed test shows what the site was doing (CLUSTERTEST_LOG=1 prints
// everything instead).
type logRing struct {
	mu    sync.Mutex
	lines []string
	next  int
	full  bool
}

func newLogRing(n int) *logRing { return &logRing{lines: make([]string, n)} }

// Write implements io.Writer for slog's text handler: one call per record.
func (r *logRing) Write(p []byte) (int, error) {
	line := strings.TrimRight(string(p), "\n")
	r.mu.Lock()
	r.lines[r.next] = line
	r.next = (r.next + 1) % len(r.lines)
	if r.next == 0 {
		r.full = true
	}
	r.mu.Unlock()
	return len(p), nil
}

// noisy are the lines of elections that go nowhere, which a cut-off node
// repeats many times a second and which would push everything else out
// of a failed test's output.
var noisy = []string{"requestVote RPC", "pre-vote", "Election timeout reached", "entering candidate state"}

// dumpIfFailed logs the last max lines that are not election noise if t
// failed.
func (r *logRing) dumpIfFailed(t testing.TB, max int) {
	if !t.Failed() {
		return
	}
	r.mu.Lock()
	var all []string
	if r.full {
		all = append(all, r.lines[r.next:]...)
	}
	all = append(all, r.lines[:r.next]...)
	r.mu.Unlock()
	var keep []string
	for i := len(all) - 1; i >= 0 && len(keep) < max; i-- {
		if !containsAny(all[i], noisy) {
			keep = append(keep, all[i])
		}
	}
	var b strings.Builder
	for i := len(keep) - 1; i >= 0; i-- {
		b.WriteString(keep[i])
		b.WriteByte('\n')
	}
	t.Logf("the site's last %d log lines (without election noise):\n%s", len(keep), b.String())
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// find returns the first line that holds sub among the lines the ring
// still keeps, or "".
func (r *logRing) find(sub string) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range r.lines {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}
