package catalog

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// applyCmd applies one command to f at index and returns Apply's result.
func applyCmd(t *testing.T, f *fsm, index uint64, cmd *peerv1.CatalogCommand) error {
	t.Helper()
	b, err := encodeCommand(cmd)
	if err != nil {
		t.Fatal(err)
	}
	res := f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
	if res == nil {
		return nil
	}
	err, ok := res.(error)
	if !ok {
		t.Fatalf("Apply returned %T %v", res, res)
	}
	return err
}

func removeCmd(node, by string) *peerv1.CatalogCommand {
	return &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_RemoveNode{RemoveNode: &peerv1.RemoveNodeRequest{NodeId: node, RequestedBy: by}}}
}

func registerCmd(node string) *peerv1.CatalogCommand {
	return &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Node{Node: &peerv1.CatalogNode{NodeId: node, PeerAddr: node + ":1", ClientAddr: node + ":2"}}}
}

// TestRemoveNodeOp: the state machine removes a registered node that holds
// no replica, records it as removed (with its addresses, the epoch of the
// removal and who asked) and bumps the epoch; it refuses to remove the
// node twice, an unknown node and a node the map assigns a replica (guard
// node-remove-check), and never registers a removed id again. A refused
// command changes nothing.
func TestRemoveNodeOp(t *testing.T) {
	f := newFuzzFSM(t) // n1, n2, n3; default/0 on n1 n2, default/1 on n2 n3
	if err := applyCmd(t, f, 10, registerCmd("n4")); err != nil {
		t.Fatal(err)
	}
	before, _ := f.snapshot()

	err := applyCmd(t, f, 11, removeCmd("n3", "client 127.0.0.1:9 via n1"))
	if !errors.Is(err, ErrNodeHasReplicas) {
		t.Fatalf("remove n3, which holds a replica of default/1: %v, want ErrNodeHasReplicas", err)
	}
	if after, _ := f.snapshot(); len(after.Nodes) != 4 || len(after.Removed) != 0 || after.Map.Epoch != before.Map.Epoch {
		t.Fatalf("a refused removal changed the state: %+v", after)
	}
	if err := applyCmd(t, f, 12, removeCmd("n9", "")); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("remove n9: %v, want ErrUnknownNode", err)
	}

	if err := applyCmd(t, f, 13, removeCmd("n4", "client 127.0.0.1:9 via n1")); err != nil {
		t.Fatalf("remove n4, which holds nothing: %v", err)
	}
	st, _ := f.snapshot()
	if _, ok := st.Nodes["n4"]; ok {
		t.Fatal("n4 is still registered after its removal")
	}
	want := RemovedNode{ID: "n4", PeerAddr: "n4:1", ClientAddr: "n4:2", Epoch: before.Map.Epoch + 1, By: "client 127.0.0.1:9 via n1"}
	if st.Removed["n4"] != want || st.Map.Epoch != want.Epoch {
		t.Fatalf("after the removal: removed %+v at epoch %d, want %+v", st.Removed, st.Map.Epoch, want)
	}
	if got := st.RemovedIDs(); len(got) != 1 || got[0] != "n4" {
		t.Fatalf("RemovedIDs = %v", got)
	}

	// Twice: NotFound-like, not a panic, nothing changes.
	if err := applyCmd(t, f, 14, removeCmd("n4", "")); !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("remove n4 again: %v, want ErrNodeRemoved", err)
	}
	// A removed id is never registered again, nor drained.
	if err := applyCmd(t, f, 15, registerCmd("n4")); !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("register n4 after its removal: %v, want ErrNodeRemoved", err)
	}
	if err := applyCmd(t, f, 16, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Drain{Drain: &peerv1.DrainRequest{NodeId: "n4", Draining: true}}}); err == nil {
		t.Fatal("drain of a removed node applied")
	}
	if again, _ := f.snapshot(); len(again.Nodes) != 3 || again.Map.Epoch != st.Map.Epoch || again.Removed["n4"] != want {
		t.Fatalf("refused commands changed the state: %+v", again)
	}
}

// TestRemovedSurvivesSnapshot: the removed ids are in the catalog's
// snapshot; a replica restored from it refuses to register them again.
func TestRemovedSurvivesSnapshot(t *testing.T) {
	f := newFuzzFSM(t)
	if err := applyCmd(t, f, 10, registerCmd("n4")); err != nil {
		t.Fatal(err)
	}
	if err := applyCmd(t, f, 11, removeCmd("n4", "client via n1")); err != nil {
		t.Fatal(err)
	}
	snap := snapshotOf(t, f)
	restored := newFSM()
	if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
		t.Fatal(err)
	}
	orig, _ := f.snapshot()
	got, _ := restored.snapshot()
	if got.Removed["n4"] != orig.Removed["n4"] || len(got.Removed) != 1 || len(got.Nodes) != 3 || got.Map.Epoch != orig.Map.Epoch {
		t.Fatalf("restored state %+v, want %+v", got, orig)
	}
	if again := snapshotOf(t, restored); !bytes.Equal(snap, again) {
		t.Fatalf("snapshot round trip:\n%s\n%s", snap, again)
	}
	if err := applyCmd(t, restored, 12, registerCmd("n4")); !errors.Is(err, ErrNodeRemoved) {
		t.Fatalf("register n4 on the restored replica: %v, want ErrNodeRemoved", err)
	}
}

// oldSnapshotState is the catalog snapshot of the releases before node
// removal (docs/adr/030): no "removed" field.
type oldSnapshotState struct {
	Map   []byte          `json:"map"`
	Nodes map[string]Node `json:"nodes"`
}

// TestRestoreSnapshotOfEarlierRelease: a snapshot written before node
// removal existed restores with no removed node and a state that takes
// removals; a snapshot that removed nothing is still one an earlier
// release reads (no "removed" field).
func TestRestoreSnapshotOfEarlierRelease(t *testing.T) {
	m := placement.NewMap(map[placement.Shard][]placement.NodeID{{Keyspace: "default", ID: 0}: {"n1", "n2"}})
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	old, err := json.Marshal(oldSnapshotState{Map: mb, Nodes: map[string]Node{
		"n1": {ID: "n1", PeerAddr: "n1:1"}, "n2": {ID: "n2", PeerAddr: "n2:1"}, "n3": {ID: "n3", PeerAddr: "n3:1", Draining: true},
	}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFSM()
	if err := f.Restore(io.NopCloser(bytes.NewReader(old))); err != nil {
		t.Fatalf("restore of an earlier release's snapshot: %v", err)
	}
	st, _ := f.snapshot()
	if st.Removed == nil || len(st.Removed) != 0 || len(st.Nodes) != 3 || !st.Nodes["n3"].Draining {
		t.Fatalf("restored %+v", st)
	}
	if again := snapshotOf(t, f); bytes.Contains(again, []byte(`"removed"`)) || !bytes.Equal(again, old) {
		t.Fatalf("a state without removals snapshots differently from the earlier release:\n%s\n%s", again, old)
	}
	if err := applyCmd(t, f, 2, removeCmd("n3", "")); err != nil {
		t.Fatalf("remove n3 after the restore: %v", err)
	}
	if st, _ := f.snapshot(); st.Removed["n3"].PeerAddr != "n3:1" {
		t.Fatalf("after the removal: %+v", st.Removed)
	}
}

// TestRemoveRefusal: the leader's decision (removeRefusal). It refuses a
// node gossip reports alive or suspect, one the map assigns replicas, and
// a catalog voter, each with what to do; an unknown and a removed node are
// not found. A node down, with no replica and no catalog seat, is removed,
// within its dead grace or past it, and whether gossip still knows it. The
// bite of guard node-remove-check.
func TestRemoveRefusal(t *testing.T) {
	m := placement.NewMap(map[placement.Shard][]placement.NodeID{
		{Keyspace: "default", ID: 0}: {"n1", "n2", "n3"},
		{Keyspace: "default", ID: 1}: {"n1", "n2", "n3"},
	})
	st := State{Map: m, Nodes: map[string]Node{}, Removed: map[string]RemovedNode{"n7": {ID: "n7", Epoch: 4}}}
	for _, n := range []string{"n1", "n2", "n3", "n4", "n5"} {
		st.Nodes[n] = Node{ID: n}
	}
	const grace = 30 * time.Second
	down := liveness{down: 5 * time.Second, known: true}
	for _, tc := range []struct {
		name  string
		node  string
		lv    liveness
		voter bool
		want  error
		say   []string // what the message must say
	}{
		{"alive", "n1", liveness{alive: true}, true, ErrNodeNotDown, []string{"gossip reports n1 alive", "kvctl node drain n1 --wait", "stop its kvd"}},
		{"suspect", "n2", liveness{suspect: true, down: time.Second, known: true}, false, ErrNodeNotDown, []string{"gossip suspects n2", "dead"}},
		{"holds replicas", "n3", down, true, ErrNodeHasReplicas, []string{"assigns n3 2 shard replicas", "down for 5s", "--dead-grace, 30s", "kvctl node drain n3 --wait"}},
		{"catalog voter", "n4", down, true, ErrCatalogVoter, []string{"n4 still votes in the site catalog", "down for 5s", "--dead-grace, 30s", "wait"}},
		{"down, nothing held", "n4", down, false, nil, nil},
		{"past the grace", "n5", liveness{down: time.Hour, known: true}, false, nil, nil},
		{"gossip forgot it", "n5", liveness{}, false, nil, nil},
		{"unknown", "n9", liveness{}, false, ErrUnknownNode, []string{`"n9"`, "kvctl cluster members"}},
		{"removed already", "n7", liveness{}, false, ErrNodeRemoved, []string{"n7 was removed already (placement epoch 4)"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := removeRefusal(st, tc.node, tc.lv, tc.voter, grace)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if !RemoveRefused(err) {
				t.Fatalf("RemoveRefused(%v) = false", err)
			}
			for _, s := range tc.say {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("message %q does not say %q", err, s)
				}
			}
		})
	}
	if RemoveRefused(ErrNotLeader) || RemoveRefused(raft.ErrLeadershipLost) {
		t.Fatal("a failure to decide counts as a refusal")
	}
}
