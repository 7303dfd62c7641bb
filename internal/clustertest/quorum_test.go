package clustertest

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/cli"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/storage"
)

// Tests of an operator's recovery from quorum losses that cannot be
// recovered safely (docs/adr/014): kvctl shard recover and
// kvd --recover-catalog.

// localValue reads key from n's own replica of its shard: its value, or
// an error when the replica does not hold it (or is not open).
func localValue(n *Node, key string) (string, error) {
	sh, err := n.Srv.Router().Shard("default", []byte(key))
	if err != nil {
		return "", err
	}
	g := n.Srv.Router().Local(sh)
	if g == nil {
		return "", fmt.Errorf("%s has no replica of %s open", n.ID, sh)
	}
	var val string
	var found bool
	err = g.Read(func(st *storage.ShardTx) error {
		r, ok, err := st.Latest([]byte(key), false)
		found = ok && !r.Tombstone
		val = string(r.Value)
		return err
	})
	if err != nil {
		return "", err
	}
	if !found {
		return "", fmt.Errorf("%s's replica of %s does not hold %q", n.ID, sh, key)
	}
	return val, nil
}

// lose kills nodes at the same moment (a kill takes a while to finish,
// but a node stops answering as it begins; the site must not re-replicate
// around the first before the next is gone).
func lose(c *Cluster, nodes ...*Node) {
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Go(func() { c.Kill(n) })
	}
	wg.Wait()
}

// kvctl runs kvctl against n and returns its exit code and output.
func kvctl(n *Node, args ...string) (code int, stdout, stderr string) {
	var out, errb bytes.Buffer
	env := cli.Env{Stdout: &out, Stderr: &errb, Getenv: func(string) string { return "" }}
	code = cli.Main(context.Background(), append([]string{"--endpoints", n.Srv.ClientAddr(), "--session-file", "none"}, args...), env)
	return code, out.String(), errb.String()
}

// recoverShard calls RecoverShard on n for shard id of the default
// keyspace with a deadline.
func recoverShard(n *Node, id uint32, node string, force bool) (*adminv1.RecoverShardResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return n.Admin.RecoverShard(ctx, &adminv1.RecoverShardRequest{Keyspace: "default", Shard: id, NodeId: node, Force: force})
}

// putAll writes value under every key through n, retrying each until it
// is acknowledged or d passes.
func putAll(t *testing.T, n *Node, keys map[uint32]string, value string, d time.Duration) {
	t.Helper()
	for id, k := range keys {
		poll.Every(50*time.Millisecond).Until(t, d, fmt.Sprintf("write %s to shard %d", k, id), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			_, err := n.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(k), Value: []byte(value)})
			return err
		})
	}
}

// readStrong checks that a STRONG read of every key through n returns
// value.
func readStrong(t *testing.T, n *Node, keys map[uint32]string, value string) {
	t.Helper()
	for id, k := range keys {
		poll.Every(50*time.Millisecond).Until(t, time.Minute, fmt.Sprintf("read %s of shard %d", k, id), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			g, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
			if status.Code(err) == codes.Unavailable {
				return err // a leader being elected
			}
			if err != nil || string(g.GetValue()) != value {
				t.Fatalf("%s through %s: %q, %v; want %q", k, n.ID, g.GetValue(), err, value)
			}
			return nil
		})
	}
}

// recoverCatalog stops n and starts it again as the only voter of the
// site catalog, giving up its other voters, and waits until it leads it.
func recoverCatalog(t *testing.T, c *Cluster, n *Node, lost []string) {
	t.Helper()
	c.Stop(n)
	c.Restart(n, func(cfg *server.Config) { cfg.RecoverCatalog = lost })
	poll.Until(t, time.Minute, n.ID+" leads the recovered catalog", poll.True(n.Srv.Catalog().IsLeader))
	if g := n.Srv.Catalog().Generation(); g != 1 {
		t.Fatalf("the recovered catalog is of generation %d, want 1", g)
	}
}

// forceEveryShard recovers every shard of the default keyspace on n that
// was not recovered yet, retrying each until the recovery is done (while
// n's replica opens).
func forceEveryShard(t *testing.T, n *Node) {
	t.Helper()
	shards, _ := n.Srv.Router().Shards("default")
	m, _ := n.Srv.Catalog().Map()
	for _, sh := range shards {
		if m.Generation(sh) > 0 {
			continue
		}
		poll.Every(100*time.Millisecond).Until(t, time.Minute, fmt.Sprintf("forced recovery of %s", sh), func() error {
			resp, err := recoverShard(n, sh.ID, n.ID, true)
			if err != nil {
				return err
			}
			if !resp.GetRecovered() {
				t.Fatalf("forced recovery of %s: %+v", sh, resp)
			}
			return nil
		})
	}
}

// catalogVoters returns the voters of the site catalog other than n.
func catalogVoters(t *testing.T, n *Node) []string {
	t.Helper()
	voters, err := n.Srv.Catalog().Voters()
	if err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(voters, func(v string) bool { return v == n.ID })
}

// TestRecoverAfterLosingTwoOfThree: of a site of three nodes, two are lost
// for good. Every shard and the site catalog lose their quorum: nothing is
// writable and nothing recovers by itself. The dry run of kvctl shard
// recover reports the group and what may be lost, and refuses; forcing it
// is refused while the catalog has no leader. The survivor is restarted
// with --recover-catalog, every shard is recovered on it with --force, and
// then every shard is writable and every write acknowledged before the
// loss (all held by the survivor) reads back.
func TestRecoverAfterLosingTwoOfThree(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, nil)
	n1 := c.Node("n1")
	keys := keyPerShard(n1, "before/")
	putAll(t, n1, keys, "before", 30*time.Second)
	for _, k := range keys {
		poll.Until(t, 30*time.Second, "n1 holds "+k, func() error { _, err := localValue(n1, k); return err })
	}
	lost := catalogVoters(t, n1)
	if len(lost) != 2 {
		t.Fatalf("catalog voters besides n1: %v, want two", lost)
	}
	lose(c, c.Node("n2"), c.Node("n3"))

	// Nothing is writable.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_, err := n1.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(keys[0]), Value: []byte("during")})
	cancel()
	if err == nil {
		t.Fatal("a write was acknowledged by one voter of three")
	}

	// The dry run, through kvctl: it reports and refuses (exit 6) once
	// the group has no leader and gossip no longer reports n2 and n3.
	var out string
	poll.Every(200*time.Millisecond).Until(t, time.Minute, "a dry run of shard 0's recovery", func() error {
		code, stdout, stderr := kvctl(n1, "shard", "recover", "--shard", "0", "--node", "n1")
		if code != cli.ExitNotForced {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stderr, "run again with --force") {
			t.Fatalf("dry run stderr %q", stderr)
		}
		out = stdout
		return nil
	})
	for _, want := range []string{"n1 ", "n2 ", "n3 ", "raft voters as n1 knows them: n1, n2, n3",
		"acknowledged writes after index", "but not stored on n1 are lost", "gives up n2, n3"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %q:\n%s", want, out)
		}
	}
	t.Logf("dry run:\n%s", out)
	resp, err := recoverShard(n1, 0, "n1", false)
	if err != nil {
		t.Fatal(err)
	}
	sv := resp.GetReplicas()[0]
	if resp.GetRecovered() || strings.Join(resp.GetLost(), ",") != "n2,n3" || sv.GetNodeId() != "n1" || !sv.GetAlive() ||
		sv.GetLastIndex() == 0 || sv.GetTerm() == 0 || resp.GetReplicas()[1].GetAlive() || resp.GetReplicas()[2].GetAlive() {
		t.Fatalf("dry run reply %+v", resp)
	}
	if m := c.Map(); m.Generation(placement.Shard{Keyspace: "default", ID: 0}) != 0 {
		t.Fatal("a dry run changed the shard's generation")
	}

	// Forcing needs the catalog, which lost its quorum too.
	poll.Until(t, time.Minute, "the catalog has no leader", func() error {
		if id, _ := n1.Srv.Catalog().Leader(); id != "" {
			return fmt.Errorf("catalog led by %s", id)
		}
		return nil
	})
	_, err = recoverShard(n1, 0, "n1", true)
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "--recover-catalog") {
		t.Fatalf("forced recovery without a catalog leader: %v", err)
	}

	recoverCatalog(t, c, n1, lost)
	// One shard through kvctl --force, the others through the admin API.
	poll.Every(200*time.Millisecond).Until(t, time.Minute, "kvctl shard recover --force of shard 0", func() error {
		code, stdout, stderr := kvctl(n1, "shard", "recover", "--shard", "0", "--node", "n1", "--force")
		if code != cli.ExitOK {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		if !strings.Contains(stdout, "recovered: n1 is the only voter of shard default/0 (generation 1") {
			t.Fatalf("kvctl --force printed:\n%s", stdout)
		}
		return nil
	})
	forceEveryShard(t, n1)

	everyShardWritable(t, n1, time.Minute)
	readStrong(t, n1, keys, "before")
	c.WaitSettled(time.Minute)
	m := c.Map()
	for _, sh := range m.SortedShards() {
		if m.Generation(sh) != 1 {
			t.Errorf("shard %s is of generation %d after one recovery", sh, m.Generation(sh))
		}
	}
}

// TestShardRecoverRefusesAGroupThatIsNotLost: a shard that has a leader or
// a live quorum has nothing to recover, forced or not, and bad requests
// get precise errors; nothing changes.
func TestShardRecoverRefusesAGroupThatIsNotLost(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	// No re-replication: n3 stays a voter of every group once killed.
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = time.Hour })
	n1 := c.Node("n1")
	check := func(what string, code codes.Code, want string, id uint32, node string, force bool) {
		t.Helper()
		_, err := recoverShard(n1, id, node, force)
		if status.Code(err) != code || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %v containing %q", what, err, code, want)
		}
	}
	check("healthy, dry run", codes.FailedPrecondition, "nothing to recover", 0, "n1", false)
	check("healthy, forced", codes.FailedPrecondition, "nothing to recover", 0, "n2", true)
	check("unknown node", codes.NotFound, `unknown node "n9"`, 0, "n9", false)
	check("no node", codes.InvalidArgument, "node_id is required", 0, "", false)
	check("unknown shard", codes.NotFound, "unknown shard 99", 99, "n1", false)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err := n1.Admin.RecoverShard(ctx, &adminv1.RecoverShardRequest{Keyspace: "nope", NodeId: "n1"})
	if status.Code(err) != codes.NotFound {
		t.Errorf("unknown keyspace: %v", err)
	}

	// One voter of three lost: the others are a quorum.
	c.Kill(c.Node("n3"))
	check("live quorum, forced", codes.FailedPrecondition, "nothing to recover", 0, "n1", true)
	poll.Until(t, time.Minute, "n3 down in gossip", func() error {
		_, err := recoverShard(n1, 0, "n3", false)
		if status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "not alive: n3") {
			return fmt.Errorf("recovery on the dead node: %v", err)
		}
		return nil
	})
	check("live quorum, forced, after the kill", codes.FailedPrecondition, "nothing to recover", 0, "n2", true)
	m := c.Map()
	for _, sh := range m.SortedShards() {
		if m.Generation(sh) != 0 || len(m.Shards[sh]) != 3 {
			t.Fatalf("a refused recovery changed %s: %v, generation %d", sh, m.Shards[sh], m.Generation(sh))
		}
	}
	everyShardWritable(t, n1, time.Minute)
}

// TestLostVoterReturnsAfterForcedRecovery: what a forced recovery may lose,
// and that a lost voter that comes back anyway never rejoins with its
// data. n1 is cut off while a write commits on n2 and n3 only; then n2 and
// n3 are lost and the site is recovered on n1 (still cut off): that write
// is gone (as the dry run warned). n2 then restarts on its old data, which holds the
// write: n1 refuses its raft traffic (another generation of the catalog
// and of every shard), n2 stops on a fatal error saying its catalog
// replica was given up, and n1 keeps serving. Restarted once more, n2
// rebuilds its catalog replica from n1, takes replicas again, and each is
// a new replica of the current generation: its old data, the lost write
// with it, is deleted, and it holds what n1 holds.
func TestLostVoterReturnsAfterForcedRecovery(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	// No re-replication while n1 is cut off.
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = time.Hour })
	n1, n2, n3 := c.Node("n1"), c.Node("n2"), c.Node("n3")
	before := keyPerShard(n1, "before/")
	putAll(t, n1, before, "before", 30*time.Second)
	for _, k := range before {
		poll.Until(t, 30*time.Second, "n1 holds "+k, func() error { _, err := localValue(n1, k); return err })
	}
	lost := catalogVoters(t, n1)

	c.Isolate(n1)
	const gone = "gone/0"
	putAll(t, n2, map[uint32]string{0: gone}, "committed without n1", time.Minute)
	poll.Until(t, 30*time.Second, "n2 holds "+gone, func() error { _, err := localValue(n2, gone); return err })
	c.Kill(n2)
	c.Kill(n3)
	// n1 stays cut off until it is recovered: what n2 and n3 wrote to it
	// and the network still held must not reach it first (faultnet
	// delivers it when the link heals, as TCP would).

	recoverCatalog(t, c, n1, lost)
	forceEveryShard(t, n1)
	everyShardWritable(t, n1, time.Minute)
	readStrong(t, n1, before, "before")
	ctx := ctxT(t, 3*time.Minute)
	if g, err := n1.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(gone), Consistency: kvv1.Consistency_CONSISTENCY_STRONG}); err != nil || g.GetFound() {
		t.Fatalf("%s after the recovery on n1: found %v (%q), %v; n1 never stored it", gone, g.GetFound(), g.GetValue(), err)
	}
	after := keyPerShard(n1, "after/")
	putAll(t, n1, after, "after", 30*time.Second)

	// n2 comes back on its old data: refused, it stops.
	c.Heal()
	c.Restart(n2, nil)
	poll.Until(t, time.Minute, "n2 stops on its given-up catalog replica", func() error {
		select {
		case <-n2.Srv.Fatal():
			return nil
		default:
			return fmt.Errorf("n2 still running (ready: %v)", n2.Srv.Ready())
		}
	})
	if err := n2.Srv.Ready(); err == nil || !strings.Contains(err.Error(), "given up by a quorum recovery") {
		t.Fatalf("n2's fatal error: %v", err)
	}
	everyShardWritable(t, n1, time.Minute)
	readStrong(t, n1, after, "after")
	c.Stop(n2)

	// Once more: n2 rebuilds its catalog replica and rejoins, with new
	// replicas only.
	c.Restart(n2, nil)
	c.WaitSettled(2 * time.Minute)
	m := c.Map()
	for _, sh := range m.SortedShards() {
		g := n2.Srv.Router().Local(sh)
		if g == nil || g.Generation() != m.Generation(sh) || m.Generation(sh) != 1 {
			t.Fatalf("n2's replica of %s: %v, map generation %d", sh, g, m.Generation(sh))
		}
	}
	if n2.Srv.Catalog().Generation() != 1 {
		t.Fatalf("n2's catalog replica is of generation %d, want 1", n2.Srv.Catalog().Generation())
	}
	for _, k := range after {
		poll.Until(t, time.Minute, "n2 holds "+k, func() error { _, err := localValue(n2, k); return err })
	}
	if v, err := localValue(n2, gone); err == nil {
		t.Fatalf("n2's new replica holds %s = %q from its old data", gone, v)
	}
	readStrong(t, n2, before, "before")
}

// TestRecoverShardWhileTheCatalogKeepsItsQuorum: in a site of five, the
// two nodes holding a shard's replicas besides one catalog voter are lost
// for good; the catalog keeps its quorum. That shard, and every other
// shard the two nodes held together, is recovered through a node that does
// not lead the catalog (it forwards the forced recoveries to the leader);
// the site then grows them back to three replicas on the live nodes, with
// the write acknowledged before the loss; the other shards keep their
// generation.
func TestRecoverShardWhileTheCatalogKeepsItsQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 5, nil)
	catVoters, err := c.Node("n1").Srv.Catalog().Voters()
	if err != nil {
		t.Fatal(err)
	}
	// A shard not held by the catalog voters alone: its survivor is a
	// catalog voter, and at most one catalog voter is lost with the others.
	m := c.Map()
	var sh placement.Shard
	var survivor string
	var lostNodes []string
	for _, s := range m.SortedShards() {
		var held, onVoters []string
		for _, r := range m.Shards[s] {
			held = append(held, string(r.Node))
			if slices.Contains(catVoters, string(r.Node)) {
				onVoters = append(onVoters, string(r.Node))
			}
		}
		if len(held) == 3 && len(onVoters) < 3 {
			sh, survivor = s, onVoters[0]
			lostNodes = slices.DeleteFunc(held, func(n string) bool { return n == survivor })
			break
		}
	}
	if survivor == "" {
		t.Fatalf("no shard of %v outside the catalog voters %v", m.Shards, catVoters)
	}
	leader, _ := c.Node(survivor).Srv.Catalog().Leader()
	var entry *Node
	for _, n := range c.Live() {
		if n.ID != leader && !slices.Contains(lostNodes, n.ID) {
			entry = n
			break
		}
	}
	t.Logf("shard %s: survivor %s, lost %v, catalog voters %v led by %s, asking %s", sh, survivor, lostNodes, catVoters, leader, entry.ID)
	var key string
	for i := 0; key == ""; i++ {
		if s, _ := entry.Srv.Router().Shard("default", []byte(fmt.Sprint("kept/", i))); s == sh {
			key = fmt.Sprint("kept/", i)
		}
	}
	putAll(t, entry, map[uint32]string{sh.ID: key}, "kept", 30*time.Second)
	poll.Until(t, 30*time.Second, survivor+" holds "+key, func() error { _, err := localValue(c.Node(survivor), key); return err })
	lose(c, c.Node(lostNodes[0]), c.Node(lostNodes[1]))

	// Every shard whose replicas included both lost nodes lost its quorum:
	// each is recovered on its remaining replica.
	var live []placement.NodeID
	for _, n := range c.Live() {
		live = append(live, placement.NodeID(n.ID))
	}
	lostShards := m.LostQuorum(live)
	if !slices.Contains(lostShards, sh) {
		t.Fatalf("shards that lost their quorum: %v, not %s", lostShards, sh)
	}
	t.Logf("shards that lost their quorum: %v", lostShards)
	for _, s := range lostShards {
		// The remaining voter (a learner may have been added on a live
		// node while only one of the two was dead: it is given up too).
		rest := ""
		for _, r := range m.Shards[s] {
			if r.Voter && !slices.Contains(lostNodes, string(r.Node)) {
				rest = string(r.Node)
			}
		}
		poll.Every(200*time.Millisecond).Until(t, time.Minute, "a dry run of the recovery of "+s.String(), func() error {
			_, err := recoverShard(entry, s.ID, rest, false)
			return err
		})
		// The catalog leader decides with its own view of gossip, which
		// may report a lost node alive a little longer.
		var resp *adminv1.RecoverShardResponse
		poll.Every(200*time.Millisecond).Until(t, time.Minute, fmt.Sprintf("forced recovery of %s on %s through %s", s, rest, entry.ID), func() (err error) {
			resp, err = recoverShard(entry, s.ID, rest, true)
			return err
		})
		if !resp.GetRecovered() || resp.GetGeneration() != 1 || slices.Contains(resp.GetLost(), rest) ||
			!slices.Contains(resp.GetLost(), lostNodes[0]) || !slices.Contains(resp.GetLost(), lostNodes[1]) {
			t.Fatalf("forced recovery of %s: %+v", s, resp)
		}
	}
	readStrong(t, entry, map[uint32]string{sh.ID: key}, "kept")
	everyShardWritable(t, entry, time.Minute)
	c.WaitSettled(2 * time.Minute)
	m = c.Map()
	if len(m.Shards[sh]) != 3 || m.Generation(sh) != 1 {
		t.Fatalf("shard %s after the recovery: %v, generation %d", sh, m.Shards[sh], m.Generation(sh))
	}
	for _, s := range m.SortedShards() {
		if want := map[bool]uint64{true: 1}[slices.Contains(lostShards, s)]; m.Generation(s) != want {
			t.Errorf("shard %s is of generation %d, want %d", s, m.Generation(s), want)
		}
	}
	for _, r := range m.Shards[sh] {
		poll.Until(t, time.Minute, string(r.Node)+" holds "+key, func() error { _, err := localValue(c.Node(string(r.Node)), key); return err })
	}
}

// TestDryRunAfterTheCatalogRecoveryReportsWhatTheSurvivorCommitted: the
// procedure restarts the surviving catalog voter (--recover-catalog)
// before the shards' dry runs. A restarted replica without a leader does
// not know raft's commit index (0), but every entry it applied was
// committed: the dry run must not say that every acknowledged write after
// index 0 could be lost.
func TestDryRunAfterTheCatalogRecoveryReportsWhatTheSurvivorCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, nil)
	n1 := c.Node("n1")
	keys := keyPerShard(n1, "before/")
	putAll(t, n1, keys, "before", 30*time.Second)
	for _, k := range keys {
		poll.Until(t, 30*time.Second, "n1 holds "+k, func() error { _, err := localValue(n1, k); return err })
	}
	lost := catalogVoters(t, n1)
	lose(c, c.Node("n2"), c.Node("n3"))
	recoverCatalog(t, c, n1, lost)

	var out string
	poll.Every(200*time.Millisecond).Until(t, time.Minute, "a dry run of shard 0's recovery", func() error {
		code, stdout, stderr := kvctl(n1, "shard", "recover", "--shard", "0", "--node", "n1")
		if code != cli.ExitNotForced {
			return fmt.Errorf("exit %d: %s", code, stderr)
		}
		out = stdout
		return nil
	})
	resp, err := recoverShard(n1, 0, "n1", false)
	if err != nil {
		t.Fatal(err)
	}
	var sv *adminv1.RecoveryReplica
	for _, r := range resp.GetReplicas() {
		if r.GetNodeId() == "n1" {
			sv = r
		}
	}
	if sv == nil || sv.GetAppliedIndex() == 0 {
		t.Fatalf("dry run reply %+v", resp)
	}
	if sv.GetCommitIndex() < sv.GetAppliedIndex() {
		t.Errorf("the survivor applied up to %d but is reported committed up to %d only:\n%s", sv.GetAppliedIndex(), sv.GetCommitIndex(), out)
	}
	if strings.Contains(out, "after index 0 ") {
		t.Errorf("the dry run says every write could be lost:\n%s", out)
	}
}

// TestRecoverCatalogRepeatedAfterItGrewBack: an operator starts the
// survivor with --recover-catalog again, with the same lost voters, after
// the catalog grew back. While the survivor is the catalog's only voter
// (a new node follows it without a vote) the start goes on and changes
// nothing; it was refused, telling the operator to name an empty list.
// Once the catalog has other voters again, the start is refused with a
// message that says there is nothing to recover, rather than to name the
// running voters as lost, and nothing changes.
func TestRecoverCatalogRepeatedAfterItGrewBack(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, func(cfg *server.Config) { cfg.Shards = 4 }) // the catalog is what counts here
	n1 := c.Node("n1")
	lost := catalogVoters(t, n1)
	if len(lost) != 2 {
		t.Fatalf("catalog voters besides n1: %v, want two", lost)
	}
	lose(c, c.Node("n2"), c.Node("n3"))
	recoverCatalog(t, c, n1, lost)

	n4 := c.Add()
	poll.Until(t, time.Minute, "n4 follows the recovered catalog", func() error {
		if id, _ := n4.Srv.Catalog().Leader(); id != "n1" || n4.Srv.Catalog().Generation() != 1 {
			return fmt.Errorf("n4's catalog leader %q, generation %d", id, n4.Srv.Catalog().Generation())
		}
		return nil
	})
	if others := catalogVoters(t, n1); len(others) != 0 {
		t.Fatalf("catalog voters besides n1 on a site of two nodes: %v, want none", others)
	}

	// The same start again: n1 is the only voter, nothing to recover.
	recoverCatalog(t, c, n1, lost)
	poll.Until(t, time.Minute, "n4 follows n1's catalog again", func() error {
		if id, _ := n4.Srv.Catalog().Leader(); id != "n1" {
			return fmt.Errorf("n4's catalog leader %q", id)
		}
		return nil
	})

	// A third node: the catalog has three voters again.
	c.Add()
	poll.Until(t, 2*time.Minute, "the catalog has three voters", func() error {
		if others := catalogVoters(t, n1); len(others) != 2 {
			return fmt.Errorf("catalog voters besides n1: %v", others)
		}
		return nil
	})
	c.Stop(n1)
	cfg := n1.Cfg
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.RecoverCatalog = lost
	srv, err := server.New(cfg, c.logger().With("test_node", "n1"))
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("n1 started with --recover-catalog naming voters the catalog no longer has, while it has a quorum")
	}
	for _, want := range []string{"n2, n3 are not among the voters", "start kvd without --recover-catalog", "refusing to start, nothing changed"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal lacks %q: %v", want, err)
		}
	}
	c.Restart(n1, nil)
	poll.Until(t, time.Minute, "n1 follows the catalog of generation 1", func() error {
		if id, _ := n1.Srv.Catalog().Leader(); id == "" || n1.Srv.Catalog().Generation() != 1 {
			return fmt.Errorf("n1's catalog leader %q, generation %d", id, n1.Srv.Catalog().Generation())
		}
		return nil
	})
}
