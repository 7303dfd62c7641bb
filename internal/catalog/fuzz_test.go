package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// seedCommands are encoded commands of every kind, valid against the state
// newFuzzFSM starts from, plus a few that are not.
func seedCommands(tb testing.TB) [][]byte {
	tb.Helper()
	m := placement.NewMap(map[placement.Shard][]placement.NodeID{{Keyspace: "ks", ID: 0}: {"n1"}})
	mb, err := m.Marshal()
	if err != nil {
		tb.Fatal(err)
	}
	shard := &peerv1.ShardRef{Keyspace: "default", Shard: 0}
	cmds := []*peerv1.CatalogCommand{
		{Op: &peerv1.CatalogCommand_InitMap{InitMap: mb}},
		{Op: &peerv1.CatalogCommand_Node{Node: &peerv1.CatalogNode{NodeId: "n4", PeerAddr: "h4:1", ClientAddr: "h4:2"}}},
		{Op: &peerv1.CatalogCommand_Drain{Drain: &peerv1.DrainRequest{NodeId: "n2", Draining: true}}},
		{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{Shard: shard, Kind: int32(placement.StepAddLearner), NodeId: "n3"}}},
		// With the command three before it (register n4): a removal that
		// applies; then one refused for the replicas n3 holds.
		{Op: &peerv1.CatalogCommand_RemoveNode{RemoveNode: &peerv1.RemoveNodeRequest{NodeId: "n4", RequestedBy: "client via n1"}}},
		{Op: &peerv1.CatalogCommand_RemoveNode{RemoveNode: &peerv1.RemoveNodeRequest{NodeId: "n3"}}},
		{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{Shard: shard, Kind: int32(placement.StepRemove), NodeId: "n1", Epoch: 1}}},
		{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{Shard: shard, Kind: int32(placement.StepForceRecover), NodeId: "n2", Generation: 1}}},
		{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{Shard: shard, Kind: int32(placement.StepRecover), NodeId: "n1", Generation: 5}}},
		{Op: &peerv1.CatalogCommand_Step{Step: &peerv1.PlacementStep{Kind: 99}}},
		{},
	}
	var out [][]byte
	for _, c := range cmds {
		b, err := encodeCommand(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, nil, []byte{0x08, 0x07}, []byte{0xff})
}

// newFuzzFSM returns a catalog state machine with three nodes and a map of
// two shards, as after a site's first start.
func newFuzzFSM(t *testing.T) *fsm {
	t.Helper()
	f := newFSM()
	m := placement.NewMap(map[placement.Shard][]placement.NodeID{
		{Keyspace: "default", ID: 0}: {"n1", "n2"},
		{Keyspace: "default", ID: 1}: {"n2", "n3"},
	})
	mb, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	cmds := []*peerv1.CatalogCommand{{Op: &peerv1.CatalogCommand_InitMap{InitMap: mb}}}
	for _, n := range []string{"n1", "n2", "n3"} {
		cmds = append(cmds, &peerv1.CatalogCommand{Op: &peerv1.CatalogCommand_Node{Node: &peerv1.CatalogNode{NodeId: n, PeerAddr: n + ":1", ClientAddr: n + ":2"}}})
	}
	for i, c := range cmds {
		b, err := encodeCommand(c)
		if err != nil {
			t.Fatal(err)
		}
		if res := f.Apply(&raft.Log{Index: uint64(i + 1), Type: raft.LogCommand, Data: b}); res != nil {
			t.Fatalf("setup command %d: %v", i, res)
		}
	}
	return f
}

// FuzzDecodeCommand: the catalog command decoder never panics, and what it
// accepts encodes back to the same command.
func FuzzDecodeCommand(f *testing.F) {
	for _, s := range seedCommands(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decodeCommand(data)
		if err != nil {
			if !errors.Is(err, ErrUnknownCommand) {
				t.Fatalf("error %v is not ErrUnknownCommand", err)
			}
			return
		}
		again, err := encodeCommand(proto.Clone(cmd).(*peerv1.CatalogCommand))
		if err != nil {
			t.Fatalf("encode of a decoded command: %v", err)
		}
		back, err := decodeCommand(again)
		if err != nil {
			t.Fatalf("decode of a re-encoded command: %v", err)
		}
		if !proto.Equal(cmd, back) {
			t.Fatalf("round trip: %v != %v", back, cmd)
		}
	})
}

// FuzzApply applies two arbitrary commands on two replicas of the catalog.
// Neither may panic; a command that does not decode is ErrUnknownCommand
// and changes nothing; both replicas must end in the same state; and that
// state must survive a snapshot and restore unchanged.
func FuzzApply(f *testing.F) {
	seeds := seedCommands(f)
	for i := range seeds {
		f.Add(seeds[i], seeds[(i+3)%len(seeds)])
	}
	f.Fuzz(func(t *testing.T, a, b []byte) {
		replicas := []*fsm{newFuzzFSM(t), newFuzzFSM(t)}
		var results []string
		for _, r := range replicas {
			var res []string
			for i, data := range [][]byte{a, b} {
				before := snapshotOf(t, r)
				out := r.Apply(&raft.Log{Index: uint64(10 + i), Type: raft.LogCommand, Data: data})
				if _, err := decodeCommand(data); err != nil {
					if e, ok := out.(error); !ok || !errors.Is(e, ErrUnknownCommand) {
						t.Fatalf("undecodable command: Apply returned %v", out)
					}
					if !bytes.Equal(before, snapshotOf(t, r)) {
						t.Fatal("an undecodable command changed the state")
					}
				}
				res = append(res, fmt.Sprint(out))
			}
			results = append(results, fmt.Sprint(res))
		}
		if results[0] != results[1] {
			t.Fatalf("replicas decided differently:\n%s\n%s", results[0], results[1])
		}
		snap := snapshotOf(t, replicas[0])
		if !bytes.Equal(snap, snapshotOf(t, replicas[1])) {
			t.Fatal("replicas diverged: their snapshots differ")
		}
		restored := newFSM()
		if err := restored.Restore(io.NopCloser(bytes.NewReader(snap))); err != nil {
			t.Fatalf("restore of a snapshot: %v", err)
		}
		if again := snapshotOf(t, restored); !bytes.Equal(snap, again) {
			t.Fatalf("snapshot round trip:\n%s\n%s", snap, again)
		}
	})
}

// snapshotOf returns the bytes f's snapshot persists.
func snapshotOf(t *testing.T, f *fsm) []byte {
	t.Helper()
	s, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Release()
	sink := &memSink{}
	if err := s.Persist(sink); err != nil {
		t.Fatal(err)
	}
	return sink.Bytes()
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }
