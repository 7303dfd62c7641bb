package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/storage"
)

// fuzzSeeds are encoded commands of every kind.
func fuzzSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	cmds := []*peerv1.Command{
		write("a", "v2", 9),
		{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("a"), Tombstone: true, Hlc: 12, Site: "s2", ClientId: "c1", Seq: 4}}},
		{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("a"), Value: []byte("cas"), Site: "s1",
			Condition: &peerv1.Condition{Kind: peerv1.Condition_KIND_VERSION, Hlc: 5, Site: "s1"}}}},
		{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("b"), Value: []byte("new"), Site: "s1",
			Condition: &peerv1.Condition{Kind: peerv1.Condition_KIND_ABSENT}}}},
		{Op: &peerv1.Command_Collect{Collect: &peerv1.Collect{CutoffHlc: 100, RequestCutoffHlc: 100, MaxKeys: 10}}},
		{Op: &peerv1.Command_DigestCheck{DigestCheck: &peerv1.DigestCheck{}}},
		{Op: &peerv1.Command_Close{Close: &peerv1.Close{Hlc: 50}}},
		replicate("s2", 0, 0, rw("a", "r1", 3, 1), rw("c", "r2", 4, 2)),
		replicate("s2", 90, 1, rw("a", "r1", 3, 1)),
		replicate("s3", 0, 0, rw("a", "gap", 3, 2)),
		{Op: &peerv1.Command_Collect{Collect: &peerv1.Collect{CutoffHlc: 100, RequestCutoffHlc: 100, MaxKeys: 10, FrontierHlc: new(uint64)}}},
		{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("d"), Value: []byte("x"), Hlc: 20, Site: "s1",
			Deps: []*peerv1.Dependency{{Keyspace: "fuzz", Shard: 1, Origin: "s2", Hlc: 3}, {Keyspace: "fuzz", AllShards: true, Origin: "s3", Hlc: 9}}}}},
		{},
	}
	var out [][]byte
	for _, c := range cmds {
		b, err := Encode(c)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, b)
	}
	return append(out, nil, []byte{0xff, 0x01}, []byte("\x08\x02"))
}

// FuzzDecode: the command decoder never panics, and what it accepts
// encodes back to a command that decodes to the same message.
func FuzzDecode(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cmd, err := decode(data)
		if err != nil {
			return
		}
		if cmd.Format != CommandFormat {
			t.Fatalf("decode accepted format %d", cmd.Format)
		}
		again, err := Encode(proto.Clone(cmd).(*peerv1.Command))
		if err != nil {
			t.Fatalf("encode of a decoded command: %v", err)
		}
		back, err := decode(again)
		if err != nil {
			t.Fatalf("decode of a re-encoded command: %v", err)
		}
		if !proto.Equal(cmd, back) {
			t.Fatalf("round trip: %v != %v", back, cmd)
		}
	})
}

// FuzzOutcome: the deduplication record decoder never panics, and a
// recorded outcome decodes to what was recorded.
func FuzzOutcome(f *testing.F) {
	f.Add([]byte(nil), uint64(0), false, "", uint64(0))
	f.Add(encodeOutcome(Result{Version: causal.Version{HLC: 7, Site: "s1"}, Existed: true}), uint64(7), true, "s1", uint64(0))
	f.Add(encodeOutcome(Result{Version: causal.Version{HLC: 7, Site: "s1"}, Seq: 3}), uint64(7), false, "s1", uint64(3))
	// A record of an earlier release: hlc, existed, site.
	f.Add(append([]byte{0, 0, 0, 0, 0, 0, 0, 9, 1}, "s2"...), uint64(9), true, "s2", uint64(0))
	f.Fuzz(func(t *testing.T, b []byte, hlc uint64, existed bool, site string, seq uint64) {
		_ = decodeOutcome(b)
		r := Result{Version: causal.Version{HLC: hlc, Site: site}, Existed: existed, Seq: seq}
		if got := decodeOutcome(encodeOutcome(r)); got.Version != r.Version || got.Existed != r.Existed || got.Seq != r.Seq {
			t.Fatalf("round trip: %+v != %+v", got, r)
		}
	})
}

// FuzzApply applies arbitrary bytes as a committed command on two
// replicas. Neither may panic; a command that does not decode stops the
// replica with ErrUnknownCommand; and both must decide the same result and
// end with the same shard state, byte for byte.
func FuzzApply(f *testing.F) {
	for _, s := range fuzzSeeds(f) {
		f.Add(s)
	}
	open := func(name string) *storage.DB {
		cfg := storage.DefaultConfig(filepath.Join(f.TempDir(), name), storage.Identity{Site: "s1", NodeID: "n1"})
		cfg.NoSync = true
		db, err := storage.Open(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { db.Close() })
		return db
	}
	dbs := []*storage.DB{open("a.db"), open("b.db")}
	shard := uint32(0)
	f.Fuzz(func(t *testing.T, data []byte) {
		// A fresh shard per input, so that every input starts from the
		// same state: one key written before the fuzzed command.
		shard++
		id := storage.ShardID{Keyspace: "fuzz", Shard: shard}
		first, err := Encode(write("a", "v1", 5))
		if err != nil {
			t.Fatal(err)
		}
		logs := []*raft.Log{
			{Index: 1, Term: 1, Type: raft.LogCommand, Data: first},
			{Index: 2, Term: 1, Type: raft.LogCommand, Data: data},
		}
		_, decodeErr := decode(data)
		var results []string
		var snaps [][]byte
		for _, db := range dbs {
			var fatals []error
			fsm, err := New(id, db, slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks{Fatal: func(err error) { fatals = append(fatals, err) }})
			if err != nil {
				t.Fatal(err)
			}
			out := fsm.ApplyBatch(logs)
			r, ok := out[1].(Result)
			if !ok {
				t.Fatalf("apply returned %T", out[1])
			}
			if decodeErr != nil && (!errors.Is(r.Err, ErrUnknownCommand) || len(fatals) != 1) {
				t.Fatalf("undecodable command (%v): result %+v, fatal calls %v", decodeErr, r, fatals)
			}
			results = append(results, fmt.Sprintf("%+v fatal=%v", r, fatals))
			var snap bytes.Buffer
			err = db.View(func(tx *storage.Tx) error { return tx.WriteShardSnapshot(id, &snap) })
			if err != nil {
				t.Fatal(err)
			}
			snaps = append(snaps, snap.Bytes())
		}
		if results[0] != results[1] {
			t.Fatalf("replicas decided differently:\n%s\n%s", results[0], results[1])
		}
		if !bytes.Equal(snaps[0], snaps[1]) {
			t.Fatal("replicas diverged: their shard snapshots differ")
		}
	})
}
