package core

import (
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in microseconds from 1µs to 5 minutes (above any
// operation timeout the harnesses use) with three significant digits
// (HdrHistogram: every value within 0.1% of its bucket).
const (
	HistMinMicros = 1
	HistMaxMicros = int64(5 * time.Minute / time.Microsecond)
	HistSigFigs   = 3
)

// NewHistogram returns an empty latency histogram (µs).
func NewHistogram() *hdrhistogram.Histogram {
	return hdrhistogram.New(HistMinMicros, HistMaxMicros, HistSigFigs)
}

// Record adds one latency to h, clamped into the histogram's range so that
// no sample is dropped (below 1µs counts as 1µs, above the maximum as the
// maximum).
func Record(h *hdrhistogram.Histogram, d time.Duration) {
	us := d.Microseconds()
	us = max(us, HistMinMicros)
	us = min(us, HistMaxMicros)
	_ = h.RecordValue(us) // in range: cannot fail
}

// Merge returns a new histogram holding every sample of hs (nil ones are
// skipped); the inputs are not modified.
func Merge(hs ...*hdrhistogram.Histogram) *hdrhistogram.Histogram {
	out := NewHistogram()
	for _, h := range hs {
		if h != nil {
			out.Merge(h)
		}
	}
	return out
}

// Latency is a latency distribution in milliseconds.
type Latency struct {
	Count  int64   `json:"count"`
	MeanMs float64 `json:"mean_ms"`
	P50Ms  float64 `json:"p50_ms"`
	P95Ms  float64 `json:"p95_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p999_ms"`
	MaxMs  float64 `json:"max_ms"`
}

// Summarize reads count, mean, p50, p95, p99, p99.9 and max of a µs
// histogram; the zero Latency for an empty or nil one. A percentile is the
// highest value equivalent to the bucket holding it (HdrHistogram's
// ValueAtQuantile), so it is never below the true percentile and at most
// 0.1% above it.
func Summarize(h *hdrhistogram.Histogram) Latency {
	if h == nil || h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{
		Count:  h.TotalCount(),
		MeanMs: h.Mean() / 1000,
		P50Ms:  ms(h.ValueAtQuantile(50)),
		P95Ms:  ms(h.ValueAtQuantile(95)),
		P99Ms:  ms(h.ValueAtQuantile(99)),
		P999Ms: ms(h.ValueAtQuantile(99.9)),
		MaxMs:  ms(h.Max()),
	}
}
