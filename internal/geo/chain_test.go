package geo

import (
	"testing"
	"time"
)

// TestSkipCountsFromTheFirstFailedCall: a site cut off at t0 fails the
// call sent at t0 when it times out (CallTimeout later) and the next call,
// sent right after, one timeout later again. Unreachable since t0, it is
// skipped by the first failure that comes SkipAfter or more after t0.
// Counted from the first failure instead, it was skipped only by the
// third one, a call timeout late.
func TestSkipCountsFromTheFirstFailedCall(t *testing.T) {
	const skipAfter, callTimeout = 5 * time.Second, 3 * time.Second
	l := newLinks()
	t0 := time.Unix(1000, 0)
	sent := t0
	for i := 1; i <= 3; i++ {
		failed := sent.Add(callTimeout)
		skipped := l.fail("s2", sent, failed, skipAfter)
		want := failed.Sub(t0) >= skipAfter
		if skipped != want {
			t.Fatalf("failed call %d, sent %v after the cut and failed %v after it: skipped %v, want %v (SkipAfter %v)",
				i, sent.Sub(t0), failed.Sub(t0), skipped, want, skipAfter)
		}
		if skipped {
			if got := l.target([]string{"s2", "s3"}, func(string) time.Time { return time.Time{} }); got != "s3" {
				t.Fatalf("after skipping s2 the chain ships to %s, want s3", got)
			}
			return
		}
		sent = failed.Add(200 * time.Millisecond)
	}
	t.Fatal("s2 was never skipped")
}
