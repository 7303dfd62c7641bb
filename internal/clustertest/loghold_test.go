package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/shard"
)

// TestReplicaThatLostEntriesHoldsItsVote: a write is committed by the
// shard's leader and one follower (the keeper) while the third replica
// (the lagger) is cut off. The keeper's write-ahead log then loses its
// tail (zeroed, as on a disk that lied about a sync) while its state
// database had applied the write, and the leader dies. The keeper and the
// lagger could elect a leader together, and neither holds the write: it
// would be lost. The keeper knows its log lost entries its state applied,
// so it grants no vote and asks for none until it holds them again: no
// leader is elected until the old one returns, and the write stays (guard
// log-hold: off, the keeper or the lagger is elected).
func TestReplicaThatLostEntriesHoldsItsVote(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shards = 1
		cfg.Shard.CloseInterval = 0
	})
	defer c.Close()
	ctx := ctxT(t, 3*time.Minute)
	var leader *Node
	poll.Until(t, time.Minute, "the shard's leader", func() error {
		for _, n := range c.Nodes {
			sh, _ := n.Srv.Router().Shard("default", []byte("lost/"))
			if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
				leader = n
				return nil
			}
		}
		return fmt.Errorf("no leader")
	})
	var others []*Node
	for _, n := range c.Nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	keeper, lagger := others[0], others[1]
	t.Logf("leader %s, keeper %s, lagger %s", leader.ID, keeper.ID, lagger.ID)
	s := ledBy(t, leader, "lost/")
	if err := s.put(ctx, leader, "before", 10*time.Second); err != nil {
		t.Fatal(err)
	}
	c.Isolate(lagger)
	// Random bytes: the record takes its size in the log whatever the
	// encoding.
	val := make([]byte, 32<<10)
	for i := range val {
		val[i] = byte(rand.IntN(256))
	}
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_, err := leader.KV.Put(pctx, &kvv1.PutRequest{Key: []byte(s.key), Value: val})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	want := s.group(leader).Raft().AppliedIndex()
	poll.Until(t, 30*time.Second, "the keeper to apply the write", func() error {
		if got := s.group(keeper).Geo().Applied; got < want {
			return fmt.Errorf("the keeper applied %d of %d", got, want)
		}
		return nil
	})
	c.Stop(keeper) // its state database keeps what it applied
	zeroWALTail(t, filepath.Join(keeper.Cfg.DataDir, "wal"), 40<<10)
	c.Kill(leader)
	c.Heal()
	c.Restart(keeper, nil)
	var g2 *shard.Group
	poll.Until(t, time.Minute, "the keeper to open its replica", func() error {
		if g2 = keeper.Srv.Router().Local(s.sh); g2 == nil {
			return fmt.Errorf("%s hosts no replica of %s yet", keeper.ID, s.sh)
		}
		return nil
	})
	if last, applied := g2.Raft().LastIndex(), g2.Geo().Applied; last >= applied {
		t.Fatalf("the keeper's log ends at %d, its state applied %d: the zeroed tail took no applied entry, the scenario decides nothing", last, applied)
	}
	// The leader is gone: no leader without the write.
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(10 * time.Second); time.Now().Before(end); <-tick.C {
		for _, n := range []*Node{keeper, lagger} {
			if g := n.Srv.Router().Local(s.sh); g != nil && g.IsLeader() {
				t.Fatalf("%s was elected while %s, the only other replica holding the acknowledged write, is down: the write is lost", n.ID, leader.ID)
			}
		}
	}
	if held := counterSum(t, keeper, "causeway_transport_lease_refusals_total", "log_held"); held == 0 {
		t.Fatal("the keeper held no vote")
	}
	// The leader returns: it is elected with the lagger's vote, and the
	// keeper gets the entries back and votes again.
	c.Restart(leader, nil)
	poll.Until(t, time.Minute, "a STRONG read of the write", func() error {
		gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		resp, err := leader.KV.Get(gctx, &kvv1.GetRequest{Key: []byte(s.key), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		if err != nil {
			return err
		}
		if !slices.Equal(resp.Value, val) {
			return fmt.Errorf("read %d bytes, not the write", len(resp.Value))
		}
		return nil
	})
	poll.Until(t, time.Minute, "the keeper's log to hold what its state applied", func() error {
		if last, applied := g2.Raft().LastIndex(), g2.Geo().Applied; last < applied {
			return fmt.Errorf("the keeper's log ends at %d, its state applied %d", last, applied)
		}
		return nil
	})
}

// zeroWALTail zeroes the last n written bytes of the newest segment in
// dir (the bytes before its preallocated zeros).
func zeroWALTail(t *testing.T, dir string, n int) {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "*.wal"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no segment in %s (%v)", dir, err)
	}
	slices.Sort(segs)
	seg := segs[len(segs)-1]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	end := len(raw)
	for end > 0 && raw[end-1] == 0 {
		end--
	}
	off := max(end-n, 4096) // not the segment header
	f, err := os.OpenFile(seg, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAt(make([]byte, end-off), int64(off)); err != nil {
		t.Fatal(err)
	}
}
