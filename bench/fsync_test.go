package bench

import (
	"os"
	"testing"
	"time"
)

func TestProbeFsync(t *testing.T) {
	dir := t.TempDir()
	res, err := ProbeFsync(dir, 20, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples < 1 || res.Samples > 20 {
		t.Errorf("samples = %d, want 1..20", res.Samples)
	}
	if !(res.P50Ms > 0 && res.P99Ms >= res.P50Ms && res.MaxMs >= res.P99Ms) {
		t.Errorf("implausible latencies: %+v", res)
	}
	if res.P50Ms > 10_000 {
		t.Errorf("p50 = %v ms: a sync taking over 10s is not sane", res.P50Ms)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("probe left files behind: %v", entries)
	}
}

func TestProbeFsyncStopsAtMaxDuration(t *testing.T) {
	start := time.Now()
	res, err := ProbeFsync(t.TempDir(), 1_000_000, 100*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if res.Samples < 1 {
		t.Errorf("samples = %d, want at least 1", res.Samples)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("probe ran %s, want it bounded by ~100ms", el)
	}
}
