package geo

import (
	"testing"
	"time"
)

// TestZeroConfigRunsPeriodicAntiEntropy: kvd leaves Config zero, and a zero
// AntiEntropyEvery takes DefaultConfig's five minutes (the periodic
// comparison docs/operations.md describes); only a negative one turns it
// off.
func TestZeroConfigRunsPeriodicAntiEntropy(t *testing.T) {
	s := New(Config{Site: "s1", NodeID: "n1"}, nil, nil, nil, nil, nil, nil)
	if got, want := s.cfg.AntiEntropyEvery, DefaultConfig().AntiEntropyEvery; got != want || want != 5*time.Minute {
		t.Fatalf("AntiEntropyEvery of a zero Config = %v, want %v (5m)", got, want)
	}
	off := New(Config{Site: "s1", NodeID: "n1", AntiEntropyEvery: -1}, nil, nil, nil, nil, nil, nil)
	if off.cfg.AntiEntropyEvery != 0 {
		t.Fatalf("AntiEntropyEvery -1 = %v, want 0 (off)", off.cfg.AntiEntropyEvery)
	}
}
