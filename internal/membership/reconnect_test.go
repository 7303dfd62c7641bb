package membership

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestReconnectJoinsSeedNeverSeen: a and b form one membership, c starts
// on its own. a has c's address among its seeds, but never saw c: the
// reconnector must join it although a is not alone (it used to try seeds
// only while it saw no other member alive, so the two groups stayed apart
// for good). Once all three are one membership, no seed is tried any
// more: a's own address and those of members alive are never targets.
func TestReconnectJoinsSeedNeverSeen(t *testing.T) {
	logger := testLogger(t)
	fast := func(cfg Config) Config { cfg.ReconnectInterval = 50 * time.Millisecond; return cfg }
	a := startNode(t, fast(testConfig("s1", "a", 7300)), logger)
	b := startNode(t, fast(testConfig("s1", "b", 7310)), logger)
	c := startNode(t, fast(testConfig("s1", "c", 7320)), logger)
	if _, err := a.TryJoin([]string{freeAddr(t)}); !errors.Is(err, ErrJoin) {
		t.Fatalf("TryJoin(a free port) = %v, want ErrJoin", err)
	}
	if n, err := b.TryJoin([]string{a.Local().GossipAddr}); err != nil || n != 1 {
		t.Fatalf("b: TryJoin(a) = %d, %v", n, err)
	}
	waitFor(t, 10*time.Second, "a and b see each other", func() (bool, string) { return allAlive(a.Members(), 2) })
	seeds := []string{a.Local().GossipAddr, b.Local().GossipAddr, c.Local().GossipAddr, c.Local().GossipAddr}
	a.SetSeeds(seeds)
	if got := a.Seeds(); !slices.Equal(got, seeds[:3]) {
		t.Fatalf("Seeds() = %v, want %v", got, seeds[:3])
	}
	for _, nd := range []testNode{a, b, c} {
		waitFor(t, 10*time.Second, nd.name+" sees the three alive", func() (bool, string) { return allAlive(nd.Members(), 3) })
	}
	if counter(t, a.metrics.reconnectAttempts) == 0 {
		t.Fatal("a joined c without a reconnect attempt")
	}
	if targets, alone := a.reconnectTargets(time.Now()); len(targets) != 0 || alone {
		t.Fatalf("a's reconnect targets with every seed alive: %v (alone %v), want none", targets, alone)
	}
}
