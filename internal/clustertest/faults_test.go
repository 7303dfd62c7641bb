package clustertest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestDeposedLeaderServesNoStaleStrongRead: the leader of a shard is cut
// off from its followers while clients still reach it. The followers
// elect a new leader and commit a newer value through it, while the old
// leader still believes it leads (its leader lease is longer than the
// followers' election timeout). A STRONG read sent to the old leader must
// not return the old value: its read barrier cannot confirm the
// leadership, so the read fails or waits for the partition to heal. With
// the read barrier turned off (guards.ReadBarrier), the old leader serves
// the stale value and porcupine rejects the history.
func TestDeposedLeaderServesNoStaleStrongRead(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		if cfg.NodeID == "n3" {
			// n3 keeps believing it leads for seconds after losing its
			// followers; the others elect a new leader in about one.
			cfg.Shard.HeartbeatTimeout, cfg.Shard.ElectionTimeout, cfg.Shard.LeaderLeaseTimeout = 6*time.Second, 6*time.Second, 6*time.Second
		}
	})
	ctx := ctxT(t, 2*time.Minute)
	old := c.Node("n3")
	// A key of a shard n3 leads (leader balancing gives it some).
	var key string
	var sh placement.Shard
	poll.Until(t, time.Minute, "a shard led by n3", func() error {
		for i := 0; i < 200; i++ {
			k := fmt.Sprint("deposed/", i)
			s, _ := old.Srv.Router().Shard("default", []byte(k))
			if g := old.Srv.Router().Local(s); g != nil && g.IsLeader() {
				key, sh = k, s
				return nil
			}
		}
		return fmt.Errorf("n3 leads no shard")
	})
	h := &history{start: time.Now()}
	put := func(n *Node, val string, timeout time.Duration) error {
		octx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		call := h.now()
		_, err := n.KV.Put(octx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(val)})
		h.add(0, kvInput{op: "put", key: key, value: val}, kvOutput{ok: err == nil, unknown: err != nil}, call, h.now())
		return err
	}
	if err := put(old, "old", 10*time.Second); err != nil {
		t.Fatal(err)
	}

	c.Isolate(old)
	t.Logf("isolated n3, leader of %s", sh)
	other := c.Node("n1")
	poll.Until(t, time.Minute, "a write through the new leader", func() error {
		return put(other, fmt.Sprint("new-", h.len()), 3*time.Second)
	})
	if g := old.Srv.Router().Local(sh); g == nil || !g.IsLeader() {
		t.Fatalf("n3 no longer believes it leads %s: the scenario needs a longer leader lease", sh)
	}
	stale := 0
	for i := 0; i < 5; i++ {
		octx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		call := h.now()
		resp, err := old.KV.Get(octx, &kvv1.GetRequest{Key: []byte(key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		cancel()
		if err == nil {
			h.add(1, kvInput{op: "get", key: key}, kvOutput{value: string(resp.Value)}, call, h.now())
			if string(resp.Value) == "old" {
				stale++
			}
		}
	}
	c.Heal()
	if res := check(t, h); res != porcupine.Ok {
		t.Fatalf("STRONG reads on a deposed leader: %d of 5 returned the overwritten value; the history is not linearizable (%v)", stale, res)
	}
}
