package causalcheck

import (
	"slices"
	"sync"

	"github.com/causeway-db/causeway/internal/causal"
)

// Recorder collects a history from concurrent clients. Each client calls
// Begin before it sends a request and End (or EndTxn) once it has the
// answer; a session must not begin an op before its previous one ended.
// Recorder is safe for concurrent use.
type Recorder struct {
	now func() int64

	mu struct {
		sync.Mutex
		ops  []Op
		open []bool // op -> begun, not ended
		tick int64  // the logical clock, when now is nil
	}
}

// Handle names an op begun on a Recorder.
type Handle int

// NewRecorder returns an empty recorder that reads times (in nanoseconds)
// from now. A nil now uses a logical clock that ticks on every Begin and End,
// which orders the ops as they happened but says nothing of their
// durations. For wall time, pass a monotonic reading, for example
//
//	t0 := time.Now()
//	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
func NewRecorder(now func() int64) *Recorder {
	return &Recorder{now: now}
}

// clockLocked reads the clock.
//
// REQUIRES: r.mu
func (r *Recorder) clockLocked() int64 {
	if r.now != nil {
		return r.now()
	}
	r.mu.tick++
	return r.mu.tick
}

// Begin records the start of an op of kind by session at site. key is the
// key of a Put, Delete or Get (empty for a GetTxn), value the value a Put
// writes.
func (r *Recorder) Begin(session, site string, kind Kind, key, value string) Handle {
	r.mu.Lock()
	defer r.mu.Unlock()
	t := r.clockLocked()
	r.mu.ops = append(r.mu.ops, Op{Session: session, Site: site, Kind: kind, Key: key, Value: value, Start: t, End: t})
	r.mu.open = append(r.mu.open, true)
	return Handle(len(r.mu.ops) - 1)
}

// End records the end of a Put, Delete or Get: for a write, the version it
// got (zero if unknown; value is ignored); for a read, the value and version
// it returned (empty and zero unless the outcome is OK).
func (r *Recorder) End(h Handle, value string, version causal.Version, outcome Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := r.endLocked(h, outcome)
	op.Version = version
	if !op.Kind.isWrite() {
		op.Value = value
	}
}

// EndTxn records the end of a GetTxn and what it returned.
func (r *Recorder) EndTxn(h Handle, reads []Read, outcome Outcome) {
	r.mu.Lock()
	defer r.mu.Unlock()
	op := r.endLocked(h, outcome)
	op.Reads = slices.Clone(reads)
}

// endLocked closes op h.
//
// REQUIRES: r.mu
func (r *Recorder) endLocked(h Handle, outcome Outcome) *Op {
	if !r.mu.open[h] {
		panic("causalcheck: op ended twice")
	}
	r.mu.open[h] = false
	op := &r.mu.ops[h]
	op.End = r.clockLocked()
	op.Outcome = outcome
	return op
}

// History returns a copy of the ops recorded so far, in the order they
// began. An op that has not ended is returned with outcome Unknown, ending
// now.
func (r *Recorder) History() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	h := slices.Clone(r.mu.ops)
	var now int64
	read := false
	for i, open := range r.mu.open {
		if !open {
			continue
		}
		if !read {
			now, read = r.clockLocked(), true
		}
		h[i].End, h[i].Outcome = now, Unknown
	}
	return h
}
