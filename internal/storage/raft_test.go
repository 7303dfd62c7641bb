package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	bolt "go.etcd.io/bbolt"
)

func checkIndexes(t *testing.T, s *RaftStore, first, last uint64) {
	t.Helper()
	f, err := s.FirstIndex()
	if err != nil {
		t.Fatalf("FirstIndex: %v", err)
	}
	l, err := s.LastIndex()
	if err != nil {
		t.Fatalf("LastIndex: %v", err)
	}
	if f != first || l != last {
		t.Fatalf("FirstIndex, LastIndex = %d, %d; want %d, %d", f, l, first, last)
	}
}

func makeLogs(from, to, term uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, &raft.Log{
			Index:      i,
			Term:       term,
			Type:       raft.LogCommand,
			Data:       []byte(fmt.Sprintf("cmd-%d", i)),
			AppendedAt: time.Unix(1_700_000_000, int64(i)),
		})
	}
	return logs
}

func TestRaftStoreEmpty(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g1")
	checkIndexes(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty store = %v, want ErrLogNotFound", err)
	}
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of missing key = %v, want exactly \"not found\"", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of missing key = %v, want exactly \"not found\"", err)
	}
	// Reading created nothing.
	if got := boltBucketNames(t, db); len(got) != 1 {
		t.Fatalf("reads created buckets: %q", got)
	}
}

func TestRaftStoreLogs(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g1")
	now := time.Now() // carries a monotonic reading and a location
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte("config"), AppendedAt: now},
		{Index: 2, Term: 1, Type: raft.LogNoop},
		{Index: 3, Term: 2, Type: raft.LogCommand, Data: []byte{0x00, 0xFF, 0x00}, Extensions: []byte("ext")},
		{Index: 4, Term: 2, Type: raft.LogBarrier, AppendedAt: time.Unix(0, 1)},
		{Index: 5, Term: math.MaxUint64, Type: raft.LogType(255), Data: bytes.Repeat([]byte("D"), 100_000), AppendedAt: time.Date(2262, 1, 1, 0, 0, 0, 999_999_999, time.UTC)},
		{Index: 6, Term: 3, Type: raft.LogCommand, Data: []byte("x"), AppendedAt: time.Unix(-1_000_000, 5)},
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs: %v", err)
	}
	checkIndexes(t, s, 1, 6)
	for _, want := range logs {
		var got raft.Log
		if err := s.GetLog(want.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", want.Index, err)
		}
		if !logsEqual(&got, want) {
			t.Errorf("GetLog(%d) = %+v\nwant %+v", want.Index, got, *want)
		}
		if got.AppendedAt.UnixNano() != want.AppendedAt.UnixNano() && !want.AppendedAt.IsZero() {
			t.Errorf("GetLog(%d) AppendedAt %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
		}
	}
	var got raft.Log
	for _, idx := range []uint64{0, 7, 100, math.MaxUint64} {
		if err := s.GetLog(idx, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Errorf("GetLog(%d) = %v, want ErrLogNotFound", idx, err)
		}
	}
	// StoreLog of a single entry, and overwriting an index (a new leader
	// replacing a conflicting suffix).
	if err := s.StoreLog(&raft.Log{Index: 6, Term: 4, Type: raft.LogCommand, Data: []byte("replaced")}); err != nil {
		t.Fatal(err)
	}
	if err := s.GetLog(6, &got); err != nil || got.Term != 4 || string(got.Data) != "replaced" || !got.AppendedAt.IsZero() {
		t.Fatalf("after overwrite GetLog(6) = %+v, %v", got, err)
	}
	// Returned data is a copy.
	if err := s.GetLog(3, &got); err != nil {
		t.Fatal(err)
	}
	got.Data[0] = 'X'
	var again raft.Log
	if err := s.GetLog(3, &again); err != nil || again.Data[0] != 0x00 {
		t.Fatalf("mutating a returned log changed the store: %+v %v", again, err)
	}
	// Persisted across reopen.
	path := db.Path()
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig(t)
	cfg.Path = path
	db2 := openDB(t, cfg)
	checkIndexes(t, db2.RaftStore("g1"), 1, 6)
	if err := db2.RaftStore("g1").GetLog(5, &got); err != nil || !logsEqual(&got, logs[4]) {
		t.Fatalf("after reopen GetLog(5) = %v", err)
	}
}

func TestRaftStoreLogIndexOrder(t *testing.T) {
	// Indexes that differ in their high bytes: FirstIndex/LastIndex must
	// compare numerically, not by string length or little-endian bytes.
	db := newDB(t)
	s := db.RaftStore("g")
	idx := []uint64{255, 256, 1 << 32, 65535, 65536}
	var logs []*raft.Log
	for _, i := range idx {
		logs = append(logs, &raft.Log{Index: i, Term: 1})
	}
	if err := s.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, s, 255, 1<<32)
}

func TestRaftStoreDeleteRange(t *testing.T) {
	tests := []struct {
		name          string
		min, max      uint64
		first, last   uint64
		wantRemaining []uint64
	}{
		{"prefix (compaction)", 1, 4, 5, 10, []uint64{5, 6, 7, 8, 9, 10}},
		{"suffix (conflict)", 7, 10, 1, 6, []uint64{1, 2, 3, 4, 5, 6}},
		{"middle", 4, 6, 1, 10, []uint64{1, 2, 3, 7, 8, 9, 10}},
		{"single", 5, 5, 1, 10, []uint64{1, 2, 3, 4, 6, 7, 8, 9, 10}},
		{"everything", 1, 10, 0, 0, nil},
		{"beyond both ends", 0, math.MaxUint64, 0, 0, nil},
		{"past the end", 11, 20, 1, 10, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
		{"overlapping the start", 0, 2, 3, 10, []uint64{3, 4, 5, 6, 7, 8, 9, 10}},
		{"empty range", 6, 5, 1, 10, []uint64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			db := newDB(t)
			s := db.RaftStore("g")
			if err := s.StoreLogs(makeLogs(1, 10, 1)); err != nil {
				t.Fatal(err)
			}
			if err := s.DeleteRange(tc.min, tc.max); err != nil {
				t.Fatalf("DeleteRange(%d, %d): %v", tc.min, tc.max, err)
			}
			checkIndexes(t, s, tc.first, tc.last)
			remaining := map[uint64]bool{}
			for _, i := range tc.wantRemaining {
				remaining[i] = true
			}
			for i := uint64(1); i <= 10; i++ {
				var l raft.Log
				err := s.GetLog(i, &l)
				switch {
				case remaining[i] && err != nil:
					t.Errorf("GetLog(%d) = %v, want present", i, err)
				case remaining[i] && string(l.Data) != fmt.Sprintf("cmd-%d", i):
					t.Errorf("GetLog(%d) data %q", i, l.Data)
				case !remaining[i] && !errors.Is(err, raft.ErrLogNotFound):
					t.Errorf("GetLog(%d) = %v, want ErrLogNotFound", i, err)
				}
			}
		})
	}
}

// DeleteRange on a group that has never stored a log is a no-op.
func TestRaftStoreDeleteRangeEmpty(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g")
	if err := s.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, s, 0, 0)
}

func TestRaftStoreGroupsIndependent(t *testing.T) {
	db := newDB(t)
	a, b := db.RaftStore("shard/ks/1"), db.RaftStore("shard/ks/10")
	if err := a.StoreLogs(makeLogs(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	if err := b.StoreLogs(makeLogs(100, 120, 7)); err != nil {
		t.Fatal(err)
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, a, 1, 5)
	checkIndexes(t, b, 100, 120)
	var l raft.Log
	if err := a.GetLog(100, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("group a sees group b's log: %v", err)
	}
	if err := b.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Errorf("group b sees group a's log: %v", err)
	}
	if err := a.DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	checkIndexes(t, a, 0, 0)
	checkIndexes(t, b, 100, 120)
	if v, err := a.GetUint64([]byte("CurrentTerm")); err != nil || v != 1 {
		t.Errorf("a CurrentTerm = %d %v", v, err)
	}
	if v, err := b.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Errorf("b CurrentTerm = %d %v", v, err)
	}
	// A third group sees nothing.
	c := db.RaftStore("shard/ks/100")
	checkIndexes(t, c, 0, 0)
	if _, err := c.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Errorf("group c Get = %v", err)
	}
	// Raft data does not show up as a shard.
	view(t, db, ShardID{Keyspace: "ks", Shard: 1}, func(s *ShardTx) {
		if recs, _, _ := s.Scan(nil, nil, 10, false); len(recs) != 0 {
			t.Errorf("shard sees raft data: %s", fmtRecords(recs))
		}
	})
}

func TestRaftStoreStable(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g")
	tests := []struct {
		key, val []byte
	}{
		{[]byte("LastVoteCand"), []byte("node-1")},
		{[]byte("bin"), []byte{0x00, 0xFF}},
		{[]byte{0x00}, []byte("nul key")},
		{[]byte("long"), bytes.Repeat([]byte("v"), 10_000)},
	}
	for _, tc := range tests {
		if err := s.Set(tc.key, tc.val); err != nil {
			t.Fatalf("Set(%q): %v", tc.key, err)
		}
	}
	for _, tc := range tests {
		got, err := s.Get(tc.key)
		if err != nil || !bytes.Equal(got, tc.val) {
			t.Errorf("Get(%q) = %q, %v; want %q", tc.key, got, err, tc.val)
		}
	}
	// Overwrite.
	if err := s.Set([]byte("bin"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Get([]byte("bin")); err != nil || string(got) != "new" {
		t.Errorf("after overwrite Get = %q %v", got, err)
	}
	// Missing key with the stable bucket present.
	if _, err := s.Get([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Errorf("Get(missing) = %v, want \"not found\"", err)
	}
	for _, v := range []uint64{0, 1, 255, 256, 1 << 40, math.MaxUint64} {
		if err := s.SetUint64([]byte("CurrentTerm"), v); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetUint64([]byte("CurrentTerm")); err != nil || got != v {
			t.Errorf("GetUint64 = %d %v, want %d", got, err, v)
		}
	}
	// A value that is not 8 bytes is reported, not misread.
	if _, err := s.GetUint64([]byte("bin")); !errors.Is(err, ErrBadEncoding) {
		t.Errorf("GetUint64 of a 3-byte value = %v, want ErrBadEncoding", err)
	}
	// Log and stable stores of a group do not mix.
	checkIndexes(t, s, 0, 0)
	// Returned values are copies.
	got, _ := s.Get([]byte("LastVoteCand"))
	got[0] = 'X'
	if again, _ := s.Get([]byte("LastVoteCand")); string(again) != "node-1" {
		t.Errorf("mutating a returned value changed the store: %q", again)
	}
}

// An empty value is a value: Get must return it, not "not found".
func TestRaftStoreStableEmptyValue(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g")
	if err := s.Set([]byte("empty"), []byte{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get([]byte("empty"))
	if err != nil {
		t.Fatalf("Get of an empty value = %v", err)
	}
	if len(got) != 0 {
		t.Fatalf("Get of an empty value = %q", got)
	}
}

// Raft groups append concurrently through the group committer.
func TestRaftStoreConcurrentGroups(t *testing.T) {
	db := newDB(t)
	const groups, batches, perBatch = 8, 10, 5
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for g := 0; g < groups; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := db.RaftStore(fmt.Sprintf("g%d", g))
			for b := 0; b < batches; b++ {
				from := uint64(b*perBatch + 1)
				if err := s.StoreLogs(makeLogs(from, from+perBatch-1, uint64(g+1))); err != nil {
					errs <- err
					return
				}
				if err := s.SetUint64([]byte("LastIndex"), from+perBatch-1); err != nil {
					errs <- err
					return
				}
				if last, err := s.LastIndex(); err != nil || last != from+perBatch-1 {
					errs <- fmt.Errorf("group %d LastIndex = %d %v", g, last, err)
					return
				}
			}
			errs <- nil
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	for g := 0; g < groups; g++ {
		s := db.RaftStore(fmt.Sprintf("g%d", g))
		checkIndexes(t, s, 1, batches*perBatch)
		var l raft.Log
		if err := s.GetLog(batches*perBatch, &l); err != nil || l.Term != uint64(g+1) {
			t.Errorf("group %d last log = %+v %v", g, l, err)
		}
	}
}

func TestDecodeLogErrors(t *testing.T) {
	good := encodeLog(&raft.Log{Term: 5, Type: raft.LogCommand, Data: []byte("abc"), Extensions: []byte("e"), AppendedAt: time.Unix(1, 2)})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"term only", []byte{0x05}},
		{"unterminated term", []byte{0x80}},
		{"no appendedAt", []byte{0x05, 0x00}},
		{"no data length", []byte{0x05, 0x00, 0x00}},
		{"data too short", []byte{0x05, 0x00, 0x00, 0x05, 'a'}},
		{"no extensions length", []byte{0x05, 0x00, 0x00, 0x01, 'a'}},
		{"trailing byte", append(bytes.Clone(good), 0x00)},
		{"truncated", good[:len(good)-1]},
		{"term overflow", append(bytes.Repeat([]byte{0xFF}, 10), 0x01)},
		{"huge data length", []byte{0x05, 0x00, 0x00, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var l raft.Log
			if err := decodeLog(tc.b, 1, &l); !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("decodeLog(%x) = %v (%+v), want ErrBadEncoding", tc.b, err, l)
			}
		})
	}
	var l raft.Log
	if err := decodeLog(good, 9, &l); err != nil || l.Index != 9 || l.Term != 5 || string(l.Data) != "abc" || string(l.Extensions) != "e" || !l.AppendedAt.Equal(time.Unix(1, 2)) {
		t.Fatalf("decodeLog(good) = %+v %v", l, err)
	}
}

// A corrupt stored entry surfaces as ErrBadEncoding from GetLog.
func TestGetLogCorruptEntry(t *testing.T) {
	db := newDB(t)
	s := db.RaftStore("g")
	if err := s.StoreLogs(makeLogs(1, 2, 1)); err != nil {
		t.Fatal(err)
	}
	err := db.Update(func(tx *Tx) error {
		return tx.btx.Bucket([]byte(prefixRaft+"g")).Bucket(bucketLog).Put([]byte{0, 0, 0, 0, 0, 0, 0, 2}, []byte{0x80})
	})
	if err != nil {
		t.Fatal(err)
	}
	var l raft.Log
	if err := s.GetLog(2, &l); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("GetLog of a corrupt entry = %v, want ErrBadEncoding", err)
	}
}

// --- hashicorp/raft end to end ---

type countingFSM struct {
	mu      sync.Mutex
	applied [][]byte
}

func (f *countingFSM) Apply(l *raft.Log) interface{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.applied = append(f.applied, bytes.Clone(l.Data))
	return len(f.applied)
}

func (f *countingFSM) commands() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.applied))
	for i, b := range f.applied {
		out[i] = string(b)
	}
	return out
}

func (f *countingFSM) Snapshot() (raft.FSMSnapshot, error) { return nopSnapshot{}, nil }
func (f *countingFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

type nopSnapshot struct{}

func (nopSnapshot) Persist(sink raft.SnapshotSink) error { return sink.Close() }
func (nopSnapshot) Release()                             {}

func startRaft(t *testing.T, store *RaftStore, fsm raft.FSM, bootstrap bool) *raft.Raft {
	t.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "node-1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	addr, trans := raft.NewInmemTransport("node-1")
	snaps := raft.NewInmemSnapshotStore()
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, cfg); err != nil {
			t.Fatalf("BootstrapCluster: %v", err)
		}
	}
	r, err := raft.NewRaft(conf, fsm, store, store, snaps, trans)
	if err != nil {
		t.Fatalf("NewRaft: %v", err)
	}
	select {
	case <-r.LeaderCh():
	case <-time.After(30 * time.Second):
		t.Fatal("no leader elected")
	}
	return r
}

func TestRaftEndToEnd(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	store := db.RaftStore("e2e")
	fsm := &countingFSM{}
	r := startRaft(t, store, fsm, true)
	var want []string
	for i := 0; i < 10; i++ {
		cmd := fmt.Sprintf("set x=%d", i)
		want = append(want, cmd)
		f := r.Apply([]byte(cmd), 10*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("Apply: %v", err)
		}
		if got := f.Response(); got != i+1 {
			t.Fatalf("Apply response %v, want %d", got, i+1)
		}
	}
	if got := fsm.commands(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("FSM applied %q, want %q", got, want)
	}
	if err := r.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
	// Bootstrapping again is refused: the store has state.
	if ok, err := raft.HasExistingState(store, store, raft.NewInmemSnapshotStore()); err != nil || !ok {
		t.Fatalf("HasExistingState = %v %v", ok, err)
	}
	last, err := store.LastIndex()
	if err != nil || last < 10 {
		t.Fatalf("LastIndex after 10 applies = %d %v", last, err)
	}
	if term, err := store.GetUint64([]byte("CurrentTerm")); err != nil || term < 1 {
		t.Fatalf("CurrentTerm = %d %v", term, err)
	}

	// Restart on the reopened database: the log is replayed into a fresh FSM.
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db2 := openDB(t, cfg)
	fsm2 := &countingFSM{}
	r2 := startRaft(t, db2.RaftStore("e2e"), fsm2, false)
	if err := r2.Apply([]byte("after restart"), 10*time.Second).Error(); err != nil {
		t.Fatalf("Apply after restart: %v", err)
	}
	if err := r2.Barrier(10 * time.Second).Error(); err != nil {
		t.Fatal(err)
	}
	want = append(want, "after restart")
	if got := fsm2.commands(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after restart FSM applied %q, want %q", got, want)
	}
	if err := r2.Shutdown().Error(); err != nil {
		t.Fatal(err)
	}
}

// TestChangedRaftTermIsRefused: raft's stable values (current term, last
// vote) are sealed. A changed byte of the term, with bbolt's pages intact,
// makes Open fail with ErrCorrupt (kvd refuses to start: a lowered term
// or vote would let the node vote twice in a term); with the
// state-checksum guard off the changed term is read as written. A raft
// database of format 2 (values unsealed) is sealed when it opens.
func TestChangedRaftTermIsRefused(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	const term = 0x0102030405060708
	if err := db.RaftStore("g").SetUint64([]byte("CurrentTerm"), term); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, binary.BigEndian.AppendUint64(nil, term))
	if at < 0 {
		t.Fatal("the term is not in the file")
	}
	changed := bytes.Clone(raw)
	changed[at+7] ^= 0x01
	if err := os.WriteFile(cfg.Path, changed, 0o600); err != nil {
		t.Fatal(err)
	}
	if db2, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			got, gerr := db2.RaftStore("g").GetUint64([]byte("CurrentTerm"))
			_ = db2.Close()
			t.Fatalf("Open accepted a changed term; it reads %x, %v", got, gerr)
		}
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}

	// Format 2: the value unsealed. Open seals it, and it reads back.
	if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(cfg.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaFormat, []byte("2")); err != nil {
			return err
		}
		return tx.Bucket([]byte(prefixRaft+"g")).Bucket(bucketStable).Put([]byte("CurrentTerm"), binary.BigEndian.AppendUint64(nil, term))
	}); err != nil {
		t.Fatal(err)
	}
	_ = b.Close()
	db3 := openDB(t, cfg)
	if got, err := db3.RaftStore("g").GetUint64([]byte("CurrentTerm")); err != nil || got != term {
		t.Fatalf("term after migrating format 2: %x, %v", got, err)
	}
}
