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
	"github.com/causeway-db/causeway/internal/storage"
)

var shardID = storage.ShardID{Keyspace: "default", Shard: 3}

func openDB(t *testing.T, name string) *storage.DB {
	t.Helper()
	db, err := storage.Open(storage.DefaultConfig(filepath.Join(t.TempDir(), name), storage.Identity{Site: "s1", NodeID: "n1"}), slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newFSM(t *testing.T, db *storage.DB) (*FSM, *[]error) {
	t.Helper()
	var fatals []error
	f, err := New(shardID, db, slog.New(slog.NewTextHandler(io.Discard, nil)), Hooks{Fatal: func(err error) { fatals = append(fatals, err) }})
	if err != nil {
		t.Fatal(err)
	}
	return f, &fatals
}

func logOf(t *testing.T, index uint64, cmd *peerv1.Command) *raft.Log {
	t.Helper()
	data, err := Encode(cmd)
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func write(key, value string, hlc uint64) *peerv1.Command {
	return &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte(key), Value: []byte(value), Hlc: hlc, Site: "s1"}}}
}

// dump renders every version of every key of the shard.
func dump(t *testing.T, db *storage.DB) string {
	t.Helper()
	var b bytes.Buffer
	err := db.View(func(tx *storage.Tx) error {
		s, err := tx.Shard(shardID)
		if err != nil {
			return err
		}
		idx, max := s.Applied()
		fmt.Fprintf(&b, "applied=%d max=%d\n", idx, max)
		for _, k := range []string{"a", "b", "c"} {
			h, err := s.History([]byte(k), 100)
			if err != nil {
				return err
			}
			for _, r := range h {
				fmt.Fprintf(&b, "%s %v %q %v\n", r.Key, r.Version, r.Value, r.Tombstone)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDeterministicApplyAndVersions(t *testing.T) {
	logs := func() []*raft.Log {
		return []*raft.Log{
			logOf(t, 1, write("a", "1", 100)),
			logOf(t, 2, write("b", "1", 50)), // proposer clock behind: raised above 100
			{Index: 3, Term: 1, Type: raft.LogConfiguration},
			logOf(t, 4, &peerv1.Command{Op: &peerv1.Command_Write{Write: &peerv1.Write{Key: []byte("a"), Tombstone: true, Hlc: 200, Site: "s1"}}}),
		}
	}
	db1, db2 := openDB(t, "one.db"), openDB(t, "two.db")
	f1, _ := newFSM(t, db1)
	f2, _ := newFSM(t, db2)
	res := f1.ApplyBatch(logs())
	for _, l := range logs() { // one at a time on the other replica
		f2.Apply(l)
	}
	if d1, d2 := dump(t, db1), dump(t, db2); d1 != d2 {
		t.Fatalf("replicas diverged:\n%s\nvs\n%s", d1, d2)
	}
	if v := res[1].(Result).Version.HLC; v != 101 {
		t.Fatalf("lagging proposer clock: version %d, want 101", v)
	}
	if r := res[3].(Result); !r.Existed || r.Version.HLC != 200 {
		t.Fatalf("delete result %+v", r)
	}
	if idx, max, _ := f1.Applied(); idx != 4 || max != 200 {
		t.Fatalf("applied = %d, %d", idx, max)
	}
	// Re-applying entries at or below the applied index (replay after a
	// restart) changes nothing.
	before := dump(t, db1)
	f1b, _ := newFSM(t, db1)
	f1b.ApplyBatch(logs())
	if after := dump(t, db1); after != before {
		t.Fatalf("replay changed state:\n%s\nvs\n%s", before, after)
	}
}

func TestConditionsAndDedup(t *testing.T) {
	f, _ := newFSM(t, openDB(t, "db"))
	i := uint64(0)
	apply := func(cmd *peerv1.Command) Result {
		i++
		return f.Apply(logOf(t, i, cmd)).(Result)
	}
	cas := func(kind peerv1.Condition_Kind, hlc uint64) *peerv1.Command {
		c := write("c", "x", 1)
		c.GetWrite().Condition = &peerv1.Condition{Kind: kind, Hlc: hlc, Site: "s1"}
		return c
	}
	if r := apply(cas(peerv1.Condition_KIND_VERSION, 5)); !errors.Is(r.Err, ErrKeyNotFound) {
		t.Fatalf("cas on missing key: %+v", r)
	}
	first := apply(cas(peerv1.Condition_KIND_ABSENT, 0))
	if first.Err != nil {
		t.Fatal(first.Err)
	}
	if r := apply(cas(peerv1.Condition_KIND_ABSENT, 0)); !errors.Is(r.Err, ErrKeyExists) || r.Current != first.Version {
		t.Fatalf("absent on existing: %+v", r)
	}
	if r := apply(cas(peerv1.Condition_KIND_VERSION, first.Version.HLC+7)); !errors.Is(r.Err, ErrVersionMismatch) || !r.CurrentFound {
		t.Fatalf("mismatch: %+v", r)
	}
	if r := apply(cas(peerv1.Condition_KIND_VERSION, first.Version.HLC)); r.Err != nil {
		t.Fatalf("matching cas: %+v", r)
	}

	w := write("d", "v", 1)
	w.GetWrite().ClientId, w.GetWrite().Seq = "client", 1
	a, b := apply(w), apply(proto.Clone(w).(*peerv1.Command))
	if a.Version != b.Version {
		t.Fatalf("retried request applied twice: %v then %v", a.Version, b.Version)
	}
}

func TestUnknownCommandStopsReplica(t *testing.T) {
	f, fatals := newFSM(t, openDB(t, "db"))
	f.Apply(logOf(t, 1, write("a", "1", 10)))
	bad := []*raft.Log{
		{Index: 2, Term: 1, Type: raft.LogCommand, Data: []byte{0xff, 0xff, 0xff}},
		logOf(t, 3, write("a", "2", 20)),
	}
	out := f.ApplyBatch(bad)
	for i, r := range out {
		if !errors.Is(r.(Result).Err, ErrUnknownCommand) {
			t.Fatalf("result %d = %+v", i, r)
		}
	}
	if len(*fatals) != 1 {
		t.Fatalf("fatal called %d times", len(*fatals))
	}
	if idx, _, _ := f.Applied(); idx != 1 {
		t.Fatalf("applied index moved past the bad entry: %d", idx)
	}
	// A future format is refused the same way.
	cmd := write("a", "3", 30)
	data, _ := proto.Marshal(cmd) // format 0
	if r := f.Apply(&raft.Log{Index: 4, Type: raft.LogCommand, Data: data}).(Result); !errors.Is(r.Err, ErrUnknownCommand) {
		t.Fatalf("unformatted command: %+v", r)
	}
}

// memSink is a raft.SnapshotSink in memory.
type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

func TestSnapshotRestore(t *testing.T) {
	src, dst := openDB(t, "src.db"), openDB(t, "dst.db")
	f1, _ := newFSM(t, src)
	for i := uint64(1); i <= 50; i++ {
		f1.Apply(logOf(t, i, write([]string{"a", "b", "c"}[i%3], fmt.Sprint(i), i*10)))
	}
	snap, err := f1.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	// Applies after Snapshot() are not in the snapshot.
	f1.Apply(logOf(t, 51, write("a", "later", 9999)))
	var sink memSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	f2, _ := newFSM(t, dst)
	f2.Apply(logOf(t, 1, write("b", "stale", 1))) // replaced by the restore
	if err := f2.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if idx, _, _ := f2.Applied(); idx != 50 {
		t.Fatalf("restored applied index %d", idx)
	}
	want := dump(t, src)
	f1b, _ := newFSM(t, openDB(t, "ref.db"))
	for i := uint64(1); i <= 50; i++ {
		f1b.Apply(logOf(t, i, write([]string{"a", "b", "c"}[i%3], fmt.Sprint(i), i*10)))
	}
	if got := dump(t, dst); got == want || got != dump(t, f1b.db) {
		t.Fatalf("restore did not reproduce the snapshot state:\n%s", got)
	}
	// A damaged snapshot is refused and leaves the state alone.
	bad := append([]byte(nil), sink.Bytes()...)
	bad[len(bad)/2] ^= 0x40
	before := dump(t, dst)
	if err := f2.Restore(io.NopCloser(bytes.NewReader(bad))); err == nil {
		t.Fatal("damaged snapshot restored")
	}
	if dump(t, dst) != before {
		t.Fatal("failed restore changed the state")
	}
}

// TestDigestCheckSeesTheStateAtItsIndex: a DigestCheck in the middle of a
// batch hands the Digest hook the state as of its own index (the writes
// before it applied, none after), so a replica that applies the log in
// other batches computes the same digests at the same indexes.
func TestDigestCheckSeesTheStateAtItsIndex(t *testing.T) {
	check := &peerv1.Command{Op: &peerv1.Command_DigestCheck{DigestCheck: &peerv1.DigestCheck{}}}
	logs := func() []*raft.Log {
		return []*raft.Log{
			logOf(t, 1, write("a", "1", 100)),
			logOf(t, 2, check),
			logOf(t, 3, write("a", "2", 110)),
			{Index: 4, Term: 1, Type: raft.LogNoop},
			logOf(t, 5, check),
			logOf(t, 6, write("b", "1", 120)),
		}
	}
	type seen struct {
		digest storage.Digest
		value  string
	}
	replica := func(name string, batches ...[]*raft.Log) map[uint64]seen {
		got := map[uint64]seen{}
		db := openDB(t, name)
		f, err := New(shardID, db, slog.New(slog.DiscardHandler), Hooks{Digest: func(index uint64, tx *storage.Tx) {
			defer tx.Rollback()
			s, err := tx.Shard(shardID)
			if err != nil {
				t.Error(err)
				return
			}
			d, err := s.Digest()
			if err != nil {
				t.Error(err)
			}
			r, _, _ := s.Latest([]byte("a"), false)
			got[index] = seen{d, string(r.Value)}
		}})
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range batches {
			for i, r := range f.ApplyBatch(b) {
				if res, ok := r.(Result); ok && res.Err != nil {
					t.Fatalf("entry %d: %v", b[i].Index, res.Err)
				}
			}
		}
		return got
	}
	one := replica("one.db", logs())
	all := logs()
	var single [][]*raft.Log
	for _, l := range all {
		single = append(single, []*raft.Log{l})
	}
	other := replica("two.db", single...)
	split := replica("three.db", all[:3], all[3:])
	if len(one) != 2 || one[2].value != "1" || one[5].value != "2" {
		t.Fatalf("digests %+v: want indexes 2 (a=1) and 5 (a=2)", one)
	}
	for _, idx := range []uint64{2, 5} {
		if one[idx].digest.Index != idx {
			t.Errorf("digest at %d describes index %d", idx, one[idx].digest.Index)
		}
		if one[idx] != other[idx] || one[idx] != split[idx] {
			t.Errorf("index %d: digests %v, %v, %v differ between batchings", idx, one[idx].digest, other[idx].digest, split[idx].digest)
		}
	}
	if one[2].digest == one[5].digest {
		t.Error("the digests before and after a write are equal")
	}
}
