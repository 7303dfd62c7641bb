package bench

import (
	"math"
	"testing"
	"time"
)

func near(got, want, relTol float64) bool {
	return math.Abs(got-want) <= relTol*math.Abs(want)
}

func TestSummarizeUniform(t *testing.T) {
	// 1..10000 µs, one sample each: the q-quantile is about q*10000 µs.
	h := NewHistogram()
	for us := 1; us <= 10000; us++ {
		RecordLatency(h, time.Duration(us)*time.Microsecond)
	}
	s := Summarize(h)
	if s.Count != 10000 {
		t.Fatalf("count = %d, want 10000", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64
	}{
		{"p50", s.P50Ms, 5.0},
		{"p99", s.P99Ms, 9.9},
		{"p99.9", s.P999Ms, 9.99},
		{"max", s.MaxMs, 10.0},
		{"mean", s.MeanMs, 5.0005},
	} {
		if !near(c.got, c.want, 0.002) { // 3 significant digits
			t.Errorf("%s = %v ms, want %v ms", c.name, c.got, c.want)
		}
	}
}

func TestMergeHistograms(t *testing.T) {
	// Client a: 900 fast ops at 100µs. Client b: 90 at 1ms and 10 at 50ms.
	a, b := NewHistogram(), NewHistogram()
	for i := 0; i < 900; i++ {
		RecordLatency(a, 100*time.Microsecond)
	}
	for i := 0; i < 90; i++ {
		RecordLatency(b, time.Millisecond)
	}
	for i := 0; i < 10; i++ {
		RecordLatency(b, 50*time.Millisecond)
	}
	m := MergeHistograms(a, nil, b)
	s := Summarize(m)
	if s.Count != 1000 {
		t.Fatalf("merged count = %d, want 1000", s.Count)
	}
	// Ranks: 1-900 → 0.1 ms, 901-990 → 1 ms, 991-1000 → 50 ms.
	if !near(s.P50Ms, 0.1, 0.002) {
		t.Errorf("p50 = %v ms, want 0.1", s.P50Ms)
	}
	if !near(s.P99Ms, 1, 0.002) {
		t.Errorf("p99 = %v ms, want 1", s.P99Ms)
	}
	if !near(s.P999Ms, 50, 0.002) {
		t.Errorf("p99.9 = %v ms, want 50", s.P999Ms)
	}
	if !near(s.MaxMs, 50, 0.002) {
		t.Errorf("max = %v ms, want 50", s.MaxMs)
	}
	// The inputs are untouched.
	if a.TotalCount() != 900 || b.TotalCount() != 100 {
		t.Errorf("inputs changed: %d, %d", a.TotalCount(), b.TotalCount())
	}
}

func TestRecordLatencyClamps(t *testing.T) {
	h := NewHistogram()
	RecordLatency(h, 0)
	RecordLatency(h, 200*time.Nanosecond)
	RecordLatency(h, time.Hour)
	if h.TotalCount() != 3 {
		t.Fatalf("count = %d, want 3 (out-of-range samples must be clamped, not dropped)", h.TotalCount())
	}
	if got := h.Min(); got != histMinMicros {
		t.Errorf("min = %d µs, want %d", got, histMinMicros)
	}
	if got := h.Max(); !near(float64(got), float64(histMaxMicros), 0.002) {
		t.Errorf("max = %d µs, want about %d", got, histMaxMicros)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	if s := Summarize(NewHistogram()); s != (Summary{}) {
		t.Errorf("empty summary = %+v", s)
	}
	if s := Summarize(nil); s != (Summary{}) {
		t.Errorf("nil summary = %+v", s)
	}
}
