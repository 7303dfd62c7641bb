package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// derivedConfig is testConfig for a state database (Derived, deferred
// commits as kvd runs it).
func derivedConfig(t *testing.T) Config {
	cfg := testConfig(t)
	cfg.Derived = true
	cfg.BootID = "boot-1"
	cfg.CommitInterval = DefaultCommitInterval
	return cfg
}

// applyRecords stores recs in shard id through ApplyShard, as the state
// machine does.
func applyRecords(t *testing.T, db *DB, id ShardID, recs ...Record) {
	t.Helper()
	for _, r := range recs {
		if err := db.ApplyShard(id, func(s *ShardTx) error { return s.Put(r) }); err != nil {
			t.Fatal(err)
		}
	}
}

// TestChangedValueByteIsRefusedAtOpen: a byte of a stored value changed
// on disk while the database was closed (bbolt's page headers are intact,
// so only the version's checksum can tell) makes Open fail with
// ErrCorrupt, which kvd answers by moving the file aside and rebuilding
// it. With the state-checksum guard off the changed value is served.
func TestChangedValueByteIsRefusedAtOpen(t *testing.T) {
	cfg := derivedConfig(t)
	db := openDB(t, cfg)
	var recs []Record
	for i := range 200 {
		recs = append(recs, Record{Key: fmt.Appendf(nil, "k%03d", i), Value: fmt.Appendf(nil, "value-%03d-%s", i, bytes.Repeat([]byte("x"), 100)), Version: ver(uint64(i+1), "a")})
	}
	applyRecords(t, db, testShard, recs...)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	needle := []byte("value-117-")
	at := bytes.Index(raw, needle)
	if at < 0 || bytes.Contains(raw[at+1:], needle) {
		t.Fatalf("the value is not stored once in the file (at %d)", at)
	}
	raw[at+7] = 'X' // value-1X7-
	if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	db2, err := Open(cfg, discardLogger(), nil)
	if err == nil {
		defer db2.Close()
		var got Record
		_ = db2.ViewShard(testShard, func(s *ShardTx) error {
			got, _, err = s.Latest([]byte("k117"), false)
			return err
		})
		t.Fatalf("Open accepted a database whose stored value changed; k117 reads %q, %v", got.Value, err)
	}
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

// TestChangedValueIsDamageOnRead: a version that fails its checksum when
// it is read (the file changed while the node ran) is an error, not an
// answer, and it marks the database damaged, which stops the node.
func TestChangedValueIsDamageOnRead(t *testing.T) {
	db := openDB(t, derivedConfig(t))
	applyRecords(t, db, testShard, Record{Key: []byte("k"), Value: []byte("hello"), Version: ver(5, "a")})
	if err := db.flush(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-db.Damaged():
		t.Fatal("damaged before anything changed")
	default:
	}
	// Change one byte of the stored value, keeping its checksum.
	if err := db.bolt.Update(func(tx *bolt.Tx) error {
		data := tx.Bucket(testShard.bucket()).Bucket(bucketData)
		k, v := data.Cursor().First()
		bad := bytes.Clone(v)
		bad[1] ^= 0x20 // "hello" -> "Hello"
		return data.Put(bytes.Clone(k), bad)
	}); err != nil {
		t.Fatal(err)
	}
	var got Record
	err := db.ViewShard(testShard, func(s *ShardTx) error {
		var err error
		got, _, err = s.Latest([]byte("k"), false)
		return err
	})
	if !errors.Is(err, ErrDamaged) {
		t.Fatalf("read of a changed value: %q, %v; want ErrDamaged", got.Value, err)
	}
	select {
	case <-db.Damaged():
	default:
		t.Fatal("Damaged not closed after a checksum failure")
	}
	if !errors.Is(db.DamagedErr(), ErrDamaged) {
		t.Fatalf("DamagedErr = %v", db.DamagedErr())
	}
	// A snapshot does not carry the damage to another replica.
	tx, err := db.BeginRead()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	if err := tx.WriteShardSnapshot(testShard, new(bytes.Buffer)); !errors.Is(err, ErrDamaged) {
		t.Fatalf("snapshot of a damaged shard: %v, want ErrDamaged", err)
	}
}

// TestEarlierStateFormatIsStale: a state database written before versions
// carried checksums is rebuilt (ErrStale), not read; raft.db's format is
// unchanged.
func TestEarlierStateFormatIsStale(t *testing.T) {
	cfg := derivedConfig(t)
	db := openDB(t, cfg)
	applyRecords(t, db, testShard, Record{Key: []byte("k"), Value: []byte("v"), Version: ver(5, "a")})
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	for _, format := range []string{"2", "3"} {
		b, err := bolt.Open(cfg.Path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Update(func(tx *bolt.Tx) error {
			return tx.Bucket(bucketMeta).Put(metaFormat, []byte(format))
		}); err != nil {
			t.Fatal(err)
		}
		_ = b.Close()
		if _, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrStale) {
			t.Fatalf("Open of a format-%s state database: %v, want ErrStale", format, err)
		}
	}
}

// TestChangedStateRecordIsRefusedAtOpen: a changed byte of a shard's
// applied index, or of a request's recorded outcome, makes Open fail with
// ErrCorrupt (kvd then rebuilds the file), and one changed while the
// database is open fails the read that meets it and marks the database
// damaged. Snapshots carry the records without their seals and restores
// seal them again. With the state-checksum guard off the changed applied
// index is taken as written.
func TestChangedStateRecordIsRefusedAtOpen(t *testing.T) {
	cfg := derivedConfig(t)
	db := openDB(t, cfg)
	if err := db.ApplyShard(testShard, func(s *ShardTx) error {
		if err := s.Put(Record{Key: []byte("k"), Value: []byte("v"), Version: ver(5, "a")}); err != nil {
			return err
		}
		if err := s.SetOrigin("s2", Progress{HLC: 9, Seq: 3}); err != nil {
			return err
		}
		if err := s.PutRequest("client-1", 7, 5, []byte("outcome-of-seven")); err != nil {
			return err
		}
		return s.SetApplied(0x1122334455667788, 5)
	}); err != nil {
		t.Fatal(err)
	}
	// A snapshot restores every record, sealed again.
	restored := openDB(t, derivedConfig(t))
	snap := shardSnapshot(t, db)
	if bytes.Contains(snap.Bytes(), seal(stateApply, binary.BigEndian.AppendUint64(nil, 0x1122334455667788))) {
		t.Fatal("the snapshot carries the applied index with its seal")
	}
	if err := restored.Update(func(tx *Tx) error { return tx.RestoreShard(testShard, bytes.NewReader(snap.Bytes())) }); err != nil {
		t.Fatal(err)
	}
	check := func(db *DB) (index uint64, origins map[string]Progress, outcome []byte, err error) {
		err = db.ViewShard(testShard, func(s *ShardTx) error {
			index, _ = s.Applied()
			if origins, err = s.Origins(); err != nil {
				return err
			}
			outcome, _, err = s.Request("client-1", 7)
			return err
		})
		if err == nil {
			err = db.DamagedErr()
		}
		return
	}
	if idx, origins, out, err := check(restored); err != nil || idx != 0x1122334455667788 || origins["s2"] != (Progress{HLC: 9, Seq: 3}) || string(out) != "outcome-of-seven" {
		t.Fatalf("restored: applied %x, origins %v, outcome %q, %v", idx, origins, out, err)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	pristine, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, needle string }{
		{"applied index", "\x11\x22\x33\x44\x55\x66\x77\x88"},
		{"request outcome", "outcome-of-seven"},
	} {
		raw := bytes.Clone(pristine)
		at := bytes.Index(raw, []byte(tc.needle))
		if at < 0 || bytes.Contains(raw[at+1:], []byte(tc.needle)) {
			t.Fatalf("%s: not stored once in the file (at %d)", tc.name, at)
		}
		raw[at+2] ^= 0x10
		if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		db2, err := Open(cfg, discardLogger(), nil)
		if err == nil {
			idx, _, out, cerr := check(db2)
			_ = db2.Close()
			t.Fatalf("%s: Open accepted a changed record; applied %x, outcome %q, %v", tc.name, idx, out, cerr)
		}
		if !errors.Is(err, ErrCorrupt) {
			t.Fatalf("%s: Open: %v, want ErrCorrupt", tc.name, err)
		}
	}

	// Changed while the database is open: the read fails.
	if err := restored.bolt.Update(func(tx *bolt.Tx) error {
		st := tx.Bucket(testShard.bucket()).Bucket(bucketState)
		bad := bytes.Clone(st.Get(stateApply))
		bad[0] ^= 0x01
		return st.Put(stateApply, bad)
	}); err != nil {
		t.Fatal(err)
	}
	if idx, _, _, err := check(restored); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read of a changed applied index: %x, %v; want ErrDamaged", idx, err)
	}
}

// TestSnapshotCarriesVersionsWithoutChecksums: a snapshot's versions are
// stored without their checksums (the snapshot's own covers them, and
// replicas of earlier builds read them) and restored with them.
func TestSnapshotCarriesVersionsWithoutChecksums(t *testing.T) {
	src := openDB(t, derivedConfig(t))
	recs := []Record{
		{Key: []byte("a"), Value: []byte("1"), Version: ver(5, "a")},
		{Key: []byte("b"), Tombstone: true, Version: ver(6, "a")},
		{Key: []byte("c"), Value: []byte("3"), Version: ver(7, "b"), Stamp: 9},
	}
	applyRecords(t, src, testShard, recs...)
	snap := shardSnapshot(t, src)
	for _, r := range recs {
		k := encodeVersionKey(r.Key, r.Version)
		if sealed := encodeValue(k, r.Value, r.Tombstone, r.Stamp); bytes.Contains(snap.Bytes(), sealed) || !bytes.Contains(snap.Bytes(), storedValue(sealed)) {
			t.Fatalf("%s: the snapshot does not hold the version without its checksum", r.Key)
		}
	}
	dst := openDB(t, derivedConfig(t))
	if err := dst.Update(func(tx *Tx) error { return tx.RestoreShard(testShard, bytes.NewReader(snap.Bytes())) }); err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		var got Record
		var found bool
		if err := dst.ViewShard(testShard, func(s *ShardTx) error {
			var err error
			got, found, err = s.Latest(r.Key, false)
			return err
		}); err != nil || !found {
			t.Fatalf("%s after restore: %v %v", r.Key, found, err)
		}
		if !bytes.Equal(got.Value, r.Value) || got.Tombstone != r.Tombstone || got.Version != r.Version || got.Stamp != r.Stamp {
			t.Fatalf("%s after restore: %+v, want %+v", r.Key, got, r)
		}
	}
}

// BenchmarkValueSum is the checksum a 1 KiB version costs on every write
// and read.
func BenchmarkValueSum(b *testing.B) {
	k := encodeVersionKey([]byte("user1234567890"), ver(1<<50, "site-a"))
	v := encodeValue(k, bytes.Repeat([]byte("v"), 1024), false, 0)
	b.SetBytes(int64(len(k) + len(v)))
	for b.Loop() {
		if _, err := checkValue(k, v); err != nil {
			b.Fatal(err)
		}
	}
}

// TestChangedOutboundEntryIsDamage: the outbound log's entries (writes
// waiting to be shipped to the other sites of the chain) carry checksums
// too: a changed byte is ErrDamaged when the entry is read (and the
// database is marked damaged), and ErrCorrupt when the file opens, never
// a changed write shipped to every other site. A snapshot carries the
// entries without their checksums and a restore adds them.
func TestChangedOutboundEntryIsDamage(t *testing.T) {
	cfg := derivedConfig(t)
	db := openDB(t, cfg)
	if err := db.ApplyShard(testShard, func(s *ShardTx) error {
		for seq := uint64(1); seq <= 3; seq++ {
			if err := s.AppendOutbound("s1", seq, fmt.Appendf(nil, "update-%d", seq)); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	read := func(db *DB) ([]OutboundEntry, error) {
		var out []OutboundEntry
		err := db.ViewShard(testShard, func(s *ShardTx) error {
			es, _, _, err := s.ReadOutbound("s1", 1, 10, 1<<20)
			for _, e := range es {
				out = append(out, OutboundEntry{Seq: e.Seq, Update: bytes.Clone(e.Update)})
			}
			return err
		})
		return out, err
	}
	es, err := read(db)
	if err != nil || len(es) != 3 || string(es[1].Update) != "update-2" {
		t.Fatalf("outbound log: %v, %v", es, err)
	}
	snap := shardSnapshot(t, db)
	restored := openDB(t, derivedConfig(t))
	if err := restored.Update(func(tx *Tx) error { return tx.RestoreShard(testShard, bytes.NewReader(snap.Bytes())) }); err != nil {
		t.Fatal(err)
	}
	if es, err := read(restored); err != nil || len(es) != 3 || string(es[2].Update) != "update-3" {
		t.Fatalf("restored outbound log: %v, %v", es, err)
	}

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(cfg.Path)
	if err != nil {
		t.Fatal(err)
	}
	at := bytes.Index(raw, []byte("update-2"))
	if at < 0 {
		t.Fatal("the entry is not in the file")
	}
	raw[at+len("update-")] = '7'
	if err := os.WriteFile(cfg.Path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	if db2, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrCorrupt) {
		if err == nil {
			es, rerr := read(db2)
			_ = db2.Close()
			t.Fatalf("Open accepted a changed outbound entry; the log reads %v, %v", es, rerr)
		}
		t.Fatalf("Open: %v, want ErrCorrupt", err)
	}

	// Changed while the database is open: the read fails.
	if err := restored.bolt.Update(func(tx *bolt.Tx) error {
		out := tx.Bucket(testShard.bucket()).Bucket(bucketOutbound)
		k, v := out.Cursor().First()
		bad := bytes.Clone(v)
		bad[0] ^= 0x01
		return out.Put(bytes.Clone(k), bad)
	}); err != nil {
		t.Fatal(err)
	}
	if es, err := read(restored); !errors.Is(err, ErrDamaged) {
		t.Fatalf("read of a changed entry: %v, %v; want ErrDamaged", es, err)
	}
	if !errors.Is(restored.DamagedErr(), ErrDamaged) {
		t.Fatalf("DamagedErr = %v", restored.DamagedErr())
	}
}

// shardSnapshot returns a snapshot of testShard in db.
func shardSnapshot(t *testing.T, db *DB) *bytes.Buffer {
	t.Helper()
	tx, err := db.BeginRead()
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var snap bytes.Buffer
	if err := tx.WriteShardSnapshot(testShard, &snap); err != nil {
		t.Fatal(err)
	}
	return &snap
}
