package transport

import (
	"encoding/binary"
	"sync/atomic"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/guards"
)

// TestIncarnationsDoNotMix: a group of three nodes, one of them of
// another incarnation of the site (a node that lost its data and
// bootstrapped a new site at a member's address): the other two replicate
// to each other, the odd one takes none of their entries and counts the
// refusals. A node of unknown incarnation adopts, and records, the first
// one it hears and replicates as usual.
func TestIncarnationsDoNotMix(t *testing.T) {
	if guards.Off(guards.SiteIncarnation) {
		t.Skip("guard site-incarnation is off")
	}
	a, b, odd := newTestNode(t, "a", nil), newTestNode(t, "b", nil), newTestNode(t, "c", nil)
	a.net.SetIncarnation(1)
	b.net.SetIncarnation(1)
	odd.net.SetIncarnation(2)
	rafts, fsms := startGroups(t, []*testNode{a, b, odd}, []string{"g"}, nil)
	leader := waitLeader(t, rafts["g"][0], rafts["g"][1])
	for i := 1; i <= 5; i++ {
		if err := leader.Apply(binary.BigEndian.AppendUint64(nil, uint64(i)), 10*time.Second).Error(); err != nil {
			t.Fatalf("apply %d: %v", i, err)
		}
	}
	waitConverged(t, 5, map[string]*countFSM{"a": fsms["g"]["a"], "b": fsms["g"]["b"]})
	if c, _, _ := fsms["g"]["c"].state(); c != 0 {
		t.Fatalf("the node of another incarnation applied %d entries", c)
	}
	waitFor(t, 10*time.Second, "refusals counted", func() bool {
		return counterValue(t, odd.net.metrics.incarnationRefusals)+counterValue(t, a.net.metrics.incarnationRefusals)+
			counterValue(t, b.net.metrics.incarnationRefusals) > 0
	})

	x, y, fresh := newTestNode(t, "x", nil), newTestNode(t, "y", nil), newTestNode(t, "z", nil)
	x.net.SetIncarnation(7)
	y.net.SetIncarnation(7)
	var recorded atomic.Uint64
	fresh.net.OnIncarnation(func(v uint64) error { recorded.Store(v); return nil })
	rafts, fsms = startGroups(t, []*testNode{x, y, fresh}, []string{"h"}, nil)
	applyN(t, rafts["h"], 1, 5)
	waitConverged(t, 5, fsms["h"])
	// It hears one once it follows: a leader's own requests carry none.
	if l := waitLeader(t, rafts["h"]...); l == fresh.rafts["h"] {
		if err := l.LeadershipTransfer().Error(); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the node of unknown incarnation to adopt one", func() bool { return fresh.net.Incarnation() != 0 })
	if got := fresh.net.Incarnation(); got != 7 || recorded.Load() != 7 {
		t.Fatalf("the node of unknown incarnation has %d, recorded %d; want 7", got, recorded.Load())
	}
}
