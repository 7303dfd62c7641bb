package server

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/causeway-db/causeway/internal/placement"
)

func TestKnownTo(t *testing.T) {
	a, b := placement.Shard{Keyspace: "default", ID: 0}, placement.Shard{Keyspace: "default", ID: 1}
	m := placement.Map{Epoch: 3, Shards: map[placement.Shard][]placement.Replica{
		a: {{Node: "n1", Voter: true}, {Node: "n3", Voter: true}},
		b: {{Node: "n1", Voter: true}, {Node: "n3", Voter: false}},
	}}
	for _, tc := range []struct {
		id      string
		voters  []string
		catalog bool
		shards  int
	}{
		{"n3", []string{"n1", "n2", "n3"}, true, 1}, // a learner of b counts for nothing
		{"n3", []string{"n1", "n2"}, false, 1},
		{"n2", []string{"n1", "n2"}, true, 0},
		{"n4", []string{"n1", "n2", "n3"}, false, 0}, // a new node
	} {
		catalog, shards := knownTo(m, tc.voters, tc.id)
		if catalog != tc.catalog || shards != tc.shards {
			t.Errorf("knownTo(%s, %v) = %v, %d; want %v, %d", tc.id, tc.voters, catalog, shards, tc.catalog, tc.shards)
		}
	}
}

// TestFreshNodeThatReachesNoOneCreatesNothing: a node on a new data
// directory whose --join reaches no node (a typo, a seed that is down)
// fails to start, and leaves the directory new: its next start, with
// --join corrected, is the start of a new directory again and runs the
// fresh-identity check (docs/adr/027). Before, it started after 20 s
// without the check, created raft.db and the log, and failed 30 s later;
// the next start took the directory for the node's own data and joined
// unchecked, under an id the site may count as a voter.
func TestFreshNodeThatReachesNoOneCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.NodeID = "n3"
	cfg.Join = []string{closed}
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("a node on a new data directory whose --join reaches no one started")
	}
	t.Logf("start: %v", err)
	if !strings.Contains(err.Error(), "left as it was") {
		t.Errorf("the error does not say that the directory is still new: %v", err)
	}
	for _, name := range []string{"raft.db", "state.db", "wal"} {
		if _, serr := os.Stat(filepath.Join(dir, name)); serr == nil {
			t.Errorf("the failed start created %s: the next start would skip the fresh-identity check", name)
		}
	}
}

// TestFreshNodeJoiningItselfCreatesNothing: a node on a new data directory
// whose --join names only its own gossip address (the first node of a
// site started with the others' --join) fails to start at once and leaves
// the directory new. Before, it waited 20 s for its own answer, started
// without a site to join, created raft.db (its next start took the
// directory for its own data) and never became ready.
func TestFreshNodeJoiningItselfCreatesNothing(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	own := ln.Addr().String()
	_ = ln.Close()
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.GossipAddr, cfg.Join = own, []string{own}
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("a node on a new data directory whose --join names only itself started")
	}
	t.Logf("start: %v (after %v)", err, time.Since(start))
	if !strings.Contains(err.Error(), "--join names this node's own gossip address") || !strings.Contains(err.Error(), "left as it was") {
		t.Errorf("the error does not say what is wrong: %v", err)
	}
	if entries, rerr := os.ReadDir(dir); rerr != nil || len(entries) > 0 {
		t.Errorf("the failed start left %v in its new data directory (%v)", entries, rerr)
	}
}
