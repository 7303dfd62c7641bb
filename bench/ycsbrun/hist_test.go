package ycsbrun

import (
	"math"
	"testing"
	"time"
)

func TestRecordClampsIntoRange(t *testing.T) {
	h := NewHistogram()
	Record(h, 0)
	Record(h, 300*time.Nanosecond)
	Record(h, -time.Second)
	Record(h, 2*time.Minute)
	if got := h.TotalCount(); got != 4 {
		t.Fatalf("count %d, want 4: no sample may be dropped", got)
	}
	if got := h.Min(); got != HistMinMicros {
		t.Errorf("min %d µs, want %d", got, HistMinMicros)
	}
	if got := h.Max(); !h.ValuesAreEquivalent(got, HistMaxMicros) {
		t.Errorf("max %d µs, want ≈ %d (60s)", got, HistMaxMicros)
	}
}

// TestSummarizePercentiles records 1..10000 µs once each: every percentile
// must be within HdrHistogram's 0.1% of the exact one and never below it.
func TestSummarizePercentiles(t *testing.T) {
	h := NewHistogram()
	for us := 1; us <= 10000; us++ {
		Record(h, time.Duration(us)*time.Microsecond)
	}
	s := Summarize(h)
	if s.Count != 10000 {
		t.Fatalf("count %d", s.Count)
	}
	for _, c := range []struct {
		name      string
		got, want float64 // ms
	}{
		{"p50", s.P50Ms, 5}, {"p95", s.P95Ms, 9.5}, {"p99", s.P99Ms, 9.9}, {"p99.9", s.P999Ms, 9.99}, {"max", s.MaxMs, 10},
		{"mean", s.MeanMs, 5.0005},
	} {
		if c.got < c.want*(1-1e-3) || c.got > c.want*(1+1e-3) {
			t.Errorf("%s = %.4f ms, want %.4f ms ± 0.1%%", c.name, c.got, c.want)
		}
	}
	if !(s.P50Ms <= s.P95Ms && s.P95Ms <= s.P99Ms && s.P99Ms <= s.P999Ms && s.P999Ms <= s.MaxMs) {
		t.Errorf("percentiles not monotonic: %+v", s)
	}
}

func TestSummarizeEmpty(t *testing.T) {
	if s := Summarize(nil); s != (Latency{}) {
		t.Errorf("nil: %+v", s)
	}
	if s := Summarize(NewHistogram()); s != (Latency{}) {
		t.Errorf("empty: %+v", s)
	}
}

// TestMergeEqualsUnion: merging per-client histograms gives the same
// distribution as recording every sample into one.
func TestMergeEqualsUnion(t *testing.T) {
	a, b, all := NewHistogram(), NewHistogram(), NewHistogram()
	for i := 1; i <= 1000; i++ {
		d := time.Duration(i*i) * time.Microsecond
		if i%3 == 0 {
			Record(a, d)
		} else {
			Record(b, d)
		}
		Record(all, d)
	}
	m := Merge(a, nil, b)
	if m.TotalCount() != 1000 || a.TotalCount()+b.TotalCount() != 1000 {
		t.Fatalf("counts: merged %d, parts %d+%d", m.TotalCount(), a.TotalCount(), b.TotalCount())
	}
	if Summarize(m) != Summarize(all) {
		t.Errorf("merged %+v, union %+v", Summarize(m), Summarize(all))
	}
	if a.TotalCount() == 0 || m == a || m == b {
		t.Error("Merge must not modify or return its inputs")
	}
	if Merge().TotalCount() != 0 {
		t.Error("Merge() not empty")
	}
}

func TestSummarizeSkewed(t *testing.T) {
	// 990 fast samples and 10 slow ones: p99 is a fast one, p99.9 a slow one.
	h := NewHistogram()
	for range 990 {
		Record(h, time.Millisecond)
	}
	for range 10 {
		Record(h, 100*time.Millisecond)
	}
	s := Summarize(h)
	if math.Abs(s.P99Ms-1) > 0.001 || math.Abs(s.P999Ms-100) > 0.1 || math.Abs(s.P50Ms-1) > 0.001 {
		t.Errorf("p50 %.3f p99 %.3f p99.9 %.3f, want 1, 1, 100", s.P50Ms, s.P99Ms, s.P999Ms)
	}
	if math.Abs(s.MeanMs-1.99) > 0.01 {
		t.Errorf("mean %.3f, want 1.99", s.MeanMs)
	}
}
