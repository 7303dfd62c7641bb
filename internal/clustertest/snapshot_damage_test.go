package clustertest

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/storage"
)

// TestDamagedSnapshotIsReplaced: a shard leader's snapshots were damaged
// on disk (a changed byte in every state.bin) while a follower was down,
// and the leader truncated its log behind them, so the follower can only
// catch up from a snapshot. Opening the damaged one fails its CRC check;
// the leader takes a new snapshot from its current state to replace it
// (snapstore.Store.SetReplace) and the follower catches up from that. Without
// the replacement every attempt failed on the same file and the follower
// stayed behind for good: the shard had no new writes to make raft take
// another snapshot.
func TestDamagedSnapshotIsReplaced(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shards = 1
		cfg.Shard.TrailingLogs = 4
		cfg.Shard.SnapshotThreshold = 1 << 20 // only the snapshots this test takes
		cfg.DeadGrace = 10 * time.Minute      // the follower keeps its replica while down
	})
	ctx := ctxT(t, 3*time.Minute)
	var sh placement.Shard
	for _, s := range c.Map().SortedShards() {
		if s.Keyspace == "default" {
			sh = s
		}
	}
	if sh.Keyspace == "" {
		t.Fatal("no shard of the default keyspace")
	}
	var leader, follower *Node
	for _, n := range c.Live() {
		if g := n.Srv.Host().Group(sh); g != nil && g.IsLeader() {
			leader = n
		} else if g != nil && follower == nil {
			follower = n
		}
	}
	if leader == nil || follower == nil {
		t.Fatalf("shard %s: leader %v, follower %v", sh, leader, follower)
	}
	behind := follower.Srv.Host().Group(sh).Raft().LastIndex()
	c.Stop(follower)

	const keys = 40
	for i := 0; i < keys; i++ {
		if _, err := leader.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(fmt.Sprintf("snap/%02d", i)), Value: []byte("v")}); err != nil {
			t.Fatalf("put %d: %v", i, err)
		}
	}
	g := leader.Srv.Host().Group(sh)
	if err := g.Snapshot(ctx); err != nil {
		t.Fatal(err)
	}
	if st := g.Status(); st.FirstLogIndex <= behind+1 {
		t.Fatalf("the leader's log starts at %d: the follower (at %d) could catch up without a snapshot", st.FirstLogIndex, behind)
	}
	dir := filepath.Join(leader.Cfg.DataDir, "snapshots", sh.Keyspace, fmt.Sprint(sh.ID), "snapshots")
	states, _ := filepath.Glob(filepath.Join(dir, "*", "state.bin"))
	if len(states) == 0 {
		t.Fatalf("no snapshot in %s", dir)
	}
	for _, p := range states {
		b, err := os.ReadFile(p)
		if err != nil || len(b) == 0 {
			t.Fatalf("read %s: %d bytes, %v", p, len(b), err)
		}
		b[len(b)/2] ^= 0xff
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	c.Restart(follower, nil)
	last := fmt.Sprintf("snap/%02d", keys-1)
	poll.Until(t, 90*time.Second, "the follower catches up from a snapshot", func() error {
		fg := follower.Srv.Host().Group(sh)
		if fg == nil {
			return fmt.Errorf("%s has no replica of %s", follower.ID, sh)
		}
		var found bool
		err := fg.Read(func(st *storage.ShardTx) error {
			_, ok, err := st.Latest([]byte(last), true)
			found = ok
			return err
		})
		if err == nil && !found {
			err = fmt.Errorf("%s not on %s yet (applied %d)", last, follower.ID, fg.Status().AppliedIndex)
		}
		return err
	})
}
