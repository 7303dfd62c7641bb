package core

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
	Record(h, time.Hour)
	if got := h.TotalCount(); got != 4 {
		t.Fatalf("count %d, want 4: no sample may be dropped", got)
	}
	if got := h.Min(); got != HistMinMicros {
		t.Errorf("min %d µs, want %d", got, HistMinMicros)
	}
	if got := h.Max(); !h.ValuesAreEquivalent(got, HistMaxMicros) {
		t.Errorf("max %d µs, want ≈ %d (5 minutes)", got, HistMaxMicros)
	}
	// The longest operation timeout in use (10s) is recorded as it is.
	h2 := NewHistogram()
	Record(h2, 10*time.Second)
	if got := Summarize(h2).MaxMs; math.Abs(got-10000) > 10 {
		t.Errorf("10s recorded as %.1f ms", got)
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
		if c.name != "mean" && c.got < c.want {
			t.Errorf("%s = %.4f ms is below the exact %.4f ms", c.name, c.got, c.want)
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

// TestMergeSkewedClients: client a has 900 fast operations, client b 90
// slower and 10 slow ones; the merged percentiles fall on the right ranks.
func TestMergeSkewedClients(t *testing.T) {
	a, b := NewHistogram(), NewHistogram()
	for range 900 {
		Record(a, 100*time.Microsecond)
	}
	for range 90 {
		Record(b, time.Millisecond)
	}
	for range 10 {
		Record(b, 50*time.Millisecond)
	}
	s := Summarize(Merge(a, b))
	// Ranks: 1-900 → 0.1 ms, 901-990 → 1 ms, 991-1000 → 50 ms.
	for _, c := range []struct {
		name      string
		got, want float64
	}{{"p50", s.P50Ms, 0.1}, {"p95", s.P95Ms, 1}, {"p99", s.P99Ms, 1}, {"p99.9", s.P999Ms, 50}, {"max", s.MaxMs, 50}, {"mean", s.MeanMs, 0.68}} {
		if math.Abs(c.got-c.want) > 0.002*c.want {
			t.Errorf("%s = %.4f ms, want %.4f", c.name, c.got, c.want)
		}
	}
}
