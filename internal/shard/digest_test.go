package shard

import (
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/storage"
)

func TestJudge(t *testing.T) {
	a, b, c := storage.Digest{Entries: 1}, storage.Digest{Entries: 2}, storage.Digest{Entries: 3}
	for _, tc := range []struct {
		name    string
		mine    storage.Digest
		digests map[string]storage.Digest // mine included, as "me"
		n       int
		want    Verdict
	}{
		{"three agree", a, map[string]storage.Digest{"me": a, "x": a, "y": a}, 3, VerdictHealthy},
		{"two of three agree, one missing", a, map[string]storage.Digest{"me": a, "x": a}, 3, VerdictHealthy},
		{"the odd one out of three", b, map[string]storage.Digest{"me": b, "x": a, "y": a}, 3, VerdictCorrupt},
		{"in the majority against the odd one", a, map[string]storage.Digest{"me": a, "x": b, "y": a}, 3, VerdictHealthy},
		{"three all differ", a, map[string]storage.Digest{"me": a, "x": b, "y": c}, 3, VerdictSuspect},
		{"two of three differ, one missing", a, map[string]storage.Digest{"me": a, "x": b}, 3, VerdictIncomplete},
		{"alone of three", a, map[string]storage.Digest{"me": a}, 3, VerdictIncomplete},
		{"two agree", a, map[string]storage.Digest{"me": a, "x": a}, 2, VerdictHealthy},
		{"two differ: both suspect", a, map[string]storage.Digest{"me": a, "x": b}, 2, VerdictSuspect},
		{"alone of two", a, map[string]storage.Digest{"me": a}, 2, VerdictIncomplete},
		{"odd one out of five", c, map[string]storage.Digest{"me": c, "w": a, "x": a, "y": a, "z": b}, 5, VerdictCorrupt},
		{"two against two of four", a, map[string]storage.Digest{"me": a, "x": a, "y": b, "z": b}, 4, VerdictSuspect},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(tc.mine, tc.digests, tc.n); got != tc.want {
				t.Fatalf("judge = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCheckStatusRefused(t *testing.T) {
	for v, want := range map[Verdict]bool{0: false, VerdictHealthy: false, VerdictCorrupt: true, VerdictSuspect: true, VerdictIncomplete: false} {
		if got := (CheckStatus{Verdict: v}).Refused(); got != want {
			t.Errorf("%v: refused = %v, want %v", v, got, want)
		}
	}
}

func TestDigestConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SnapshotDir = "x"
	if err := cfg.Validate(); err != nil || cfg.DigestInterval <= 0 || cfg.DigestTimeout <= 0 {
		t.Fatalf("defaults: %v, interval %v, timeout %v", err, cfg.DigestInterval, cfg.DigestTimeout)
	}
	cfg.DigestInterval = -1
	if cfg.Validate() == nil {
		t.Error("negative DigestInterval accepted")
	}
	cfg.DigestInterval, cfg.DigestTimeout = 0, 0
	if err := cfg.Validate(); err != nil {
		t.Errorf("checks off: %v", err)
	}
	cfg.DigestInterval = 1
	if cfg.Validate() == nil {
		t.Error("checks on without a timeout accepted")
	}
}

func TestSuspects(t *testing.T) {
	a, b := storage.Digest{Entries: 1}, storage.Digest{Entries: 2}
	for _, tc := range []struct {
		digests map[string]storage.Digest
		n       int
		want    string
	}{
		{map[string]storage.Digest{"n1": a, "n2": a, "n3": b}, 3, "n3"},
		{map[string]storage.Digest{"n1": a, "n2": b}, 2, "n1,n2"},
		{map[string]storage.Digest{"n1": a, "n2": b}, 3, "n1,n2"},
		{map[string]storage.Digest{"n1": a, "n2": a}, 3, ""},
	} {
		if got := strings.Join(suspects(tc.digests, tc.n), ","); got != tc.want {
			t.Errorf("suspects(%v, %d) = %q, want %q", tc.digests, tc.n, got, tc.want)
		}
	}
	if got := formatDigests(map[string]storage.Digest{"n2": b, "n1": a}); !strings.HasPrefix(got, "n1=") || !strings.Contains(got, " n2=") {
		t.Errorf("formatDigests = %q", got)
	}
}
