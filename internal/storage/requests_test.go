package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"runtime"
	"testing"

	bolt "go.etcd.io/bbolt"
)

// lookupInUpdate looks a request id up in a read-write transaction (as an
// apply does: through the index, built if missing).
func lookupInUpdate(t *testing.T, db *DB, id ShardID, client string, seq uint64) (string, bool) {
	t.Helper()
	var out []byte
	var ok bool
	if err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		out, ok, _ = s.Request(client, seq)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return string(out), ok
}

func putRequests(t *testing.T, db *DB, id ShardID, n int, clients ...string) {
	t.Helper()
	if err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		for i := 1; i <= n; i++ {
			c := clients[i%len(clients)]
			if err := s.PutRequest(c, uint64(i), uint64(100+i), []byte(fmt.Sprint("out-", c, i))); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Request records are stored in commit order, whatever their client, and
// every one is found through the index.
func TestRequestsInCommitOrder(t *testing.T) {
	db := newDB(t)
	clients := []string{"c-zz", "c-aa", "c-mm"}
	putRequests(t, db, testShard, 300, clients...)
	var hlcs []uint64
	if err := db.View(func(tx *Tx) error {
		return tx.btx.Bucket(testShard.bucket()).Bucket(bucketRequests).ForEach(func(k, _ []byte) error {
			h, _, _, err := decodeRequestKey(k)
			hlcs = append(hlcs, h)
			return err
		})
	}); err != nil {
		t.Fatal(err)
	}
	if len(hlcs) != 300 {
		t.Fatalf("%d records, want 300", len(hlcs))
	}
	for i := 1; i < len(hlcs); i++ {
		if hlcs[i] <= hlcs[i-1] {
			t.Fatalf("record %d at hlc %d follows hlc %d", i, hlcs[i], hlcs[i-1])
		}
	}
	for i := 1; i <= 300; i++ {
		c := clients[i%len(clients)]
		if out, ok := lookupInUpdate(t, db, testShard, c, uint64(i)); !ok || out != fmt.Sprint("out-", c, i) {
			t.Fatalf("Request(%s, %d) = %q %v", c, i, out, ok)
		}
	}
	if out, ok := lookupInUpdate(t, db, testShard, clients[0], 1); ok {
		t.Fatalf("Request of another client's seq = %q", out)
	}
	if n := db.reqIdx.size(); n != 300 {
		t.Fatalf("index holds %d ids, want 300", n)
	}
}

// A reopened database finds every request id: read-only transactions scan
// until a read-write one builds the index from the bucket.
func TestRequestIndexRebuiltAtOpen(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	putRequests(t, db, testShard, 50, "a", "b")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	db = openDB(t, cfg)
	if db.reqIdx.lookup(testShard) != nil {
		t.Fatal("an index exists before any transaction needed it")
	}
	view(t, db, testShard, func(s *ShardTx) {
		if out, ok, _ := s.Request("b", 7); !ok || string(out) != "out-b7" {
			t.Fatalf("read-only Request = %q %v", out, ok)
		}
	})
	if db.reqIdx.lookup(testShard) != nil {
		t.Fatal("a read-only transaction built the index")
	}
	if out, ok := lookupInUpdate(t, db, testShard, "a", 8); !ok || out != "out-a8" {
		t.Fatalf("Request = %q %v", out, ok)
	}
	if n := db.reqIdx.size(); n != 50 {
		t.Fatalf("index holds %d ids, want 50", n)
	}
}

// A transaction that fails leaves the index as committed: the request ids
// its garbage collection removed are still found, and those it recorded
// are not. (The bite of guard request-index-rollback.)
func TestRequestIndexAfterFailedTransaction(t *testing.T) {
	db := newDB(t)
	putRequests(t, db, testShard, 10, "c")
	boom := errors.New("boom")
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if _, _, err := s.Collect(0, 105, nil, 10); err != nil {
			return err
		}
		if _, ok, _ := s.Request("c", 3); ok {
			return errors.New("collected id still found inside the transaction")
		}
		if err := s.PutRequest("new", 1, 200, []byte("x")); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update = %v, want boom", err)
	}
	for i := uint64(1); i <= 10; i++ {
		if out, ok := lookupInUpdate(t, db, testShard, "c", i); !ok || out != fmt.Sprint("out-c", i) {
			t.Fatalf("after the failed transaction Request(c, %d) = %q %v, want its outcome", i, out, ok)
		}
	}
	if out, ok := lookupInUpdate(t, db, testShard, "new", 1); ok {
		t.Fatalf("a rolled-back id is found: %q", out)
	}
	// The same through UpdateAlone.
	if err := db.UpdateAlone(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if _, _, err := s.Collect(0, 110, nil, 10); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("UpdateAlone = %v, want boom", err)
	}
	if _, ok := lookupInUpdate(t, db, testShard, "c", 9); !ok {
		t.Fatal("after the failed UpdateAlone a stored id is not found")
	}
}

// Garbage collection deletes a prefix of the records and forgets their ids
// in the index.
func TestCollectRequestsShrinksTheIndex(t *testing.T) {
	db := newDB(t)
	putRequests(t, db, testShard, 100, "a", "b", "c")
	if _, ok := lookupInUpdate(t, db, testShard, "a", 3); !ok {
		t.Fatal("missing before collection")
	}
	collect(t, db, testShard, 0, 150, nil, 10)
	if n := db.reqIdx.size(); n != 50 {
		t.Fatalf("index holds %d ids after collection, want 50", n)
	}
	for i := uint64(1); i <= 100; i++ {
		_, ok := lookupInUpdate(t, db, testShard, []string{"a", "b", "c"}[i%3], i)
		if ok != (100+i > 150) {
			t.Fatalf("seq %d (hlc %d) found = %v after collecting up to 150", i, 100+i, ok)
		}
	}
}

// A newer outcome for the same id replaces the older record.
func TestPutRequestReplaces(t *testing.T) {
	db := newDB(t)
	for _, hlc := range []uint64{5, 9} {
		if err := db.Update(func(tx *Tx) error {
			s, err := tx.Shard(testShard)
			if err != nil {
				return err
			}
			return s.PutRequest("c", 1, hlc, []byte(fmt.Sprint(hlc)))
		}); err != nil {
			t.Fatal(err)
		}
	}
	if out, ok := lookupInUpdate(t, db, testShard, "c", 1); !ok || out != "9" {
		t.Fatalf("Request = %q %v", out, ok)
	}
	var n int
	_ = db.View(func(tx *Tx) error {
		n = tx.btx.Bucket(testShard.bucket()).Bucket(bucketRequests).Stats().KeyN
		return nil
	})
	if n != 1 {
		t.Fatalf("%d records, want 1", n)
	}
}

// Restoring a snapshot or dropping the shard replaces its request ids: the
// index follows.
func TestRequestIndexFollowsRestoreAndDrop(t *testing.T) {
	src := newDB(t)
	putRequests(t, src, testShard, 5, "snap")
	stream := snapshot(t, src, testShard)

	db := newDB(t)
	putRequests(t, db, testShard, 5, "old")
	if _, ok := lookupInUpdate(t, db, testShard, "old", 2); !ok {
		t.Fatal("missing before restore")
	}
	if err := restore(db, testShard, stream); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookupInUpdate(t, db, testShard, "old", 2); ok {
		t.Fatal("an id of the replaced state is found")
	}
	if out, ok := lookupInUpdate(t, db, testShard, "snap", 2); !ok || out != "out-snap2" {
		t.Fatalf("restored id: %q %v", out, ok)
	}
	if err := db.Update(func(tx *Tx) error { return tx.DropShard(testShard) }); err != nil {
		t.Fatal(err)
	}
	if _, ok := lookupInUpdate(t, db, testShard, "snap", 2); ok {
		t.Fatal("an id of the dropped shard is found")
	}
}

// A format-1 snapshot stream (request records keyed by client id) restores
// into commit-order records.
func TestRestoreFormat1Snapshot(t *testing.T) {
	var body bytes.Buffer
	body.WriteString("CWSNAP\x01")
	rec := func(tag byte, k, v []byte) {
		body.WriteByte(tag)
		body.Write(binary.AppendUvarint(nil, uint64(len(k))))
		body.Write(k)
		body.Write(binary.AppendUvarint(nil, uint64(len(v))))
		body.Write(v)
	}
	oldKey := binary.BigEndian.AppendUint64([]byte("client-1\x00"), 7)
	rec(tagRequests, oldKey, append(binary.BigEndian.AppendUint64(nil, 42), "outcome"...))
	body.WriteByte(tagEnd)
	stream := binary.BigEndian.AppendUint32(body.Bytes(), crc32.Checksum(body.Bytes(), castagnoli))

	db := newDB(t)
	if err := restore(db, testShard, stream); err != nil {
		t.Fatal(err)
	}
	if out, ok := lookupInUpdate(t, db, testShard, "client-1", 7); !ok || out != "outcome" {
		t.Fatalf("Request = %q %v", out, ok)
	}
	_ = db.View(func(tx *Tx) error {
		k, _ := tx.btx.Bucket(testShard.bucket()).Bucket(bucketRequests).Cursor().First()
		if h, _, _, err := decodeRequestKey(k); err != nil || h != 42 {
			t.Errorf("stored key %x: hlc %d, %v", k, h, err)
		}
		return nil
	})
}

// A database of format 1 is migrated at Open: its request ids are found
// afterwards, it is marked format 2, and its digest of the request ids is
// the one format 1 computed (replicas of both versions compare alike).
func TestOpenMigratesFormat1(t *testing.T) {
	var v1Digest uint64
	cfg := format1File(t, func(rb *bolt.Bucket) error {
		for seq := uint64(1); seq <= 3; seq++ {
			for _, c := range []string{"c", "b"} {
				// Client b's later seqs have the smaller hlcs: the
				// orders of the two formats differ.
				k := binary.BigEndian.AppendUint64([]byte(c+"\x00"), seq)
				hlc := 10 * seq
				if c == "b" {
					hlc = 100 - seq
				}
				if err := rb.Put(k, append(binary.BigEndian.AppendUint64(nil, hlc), fmt.Sprint("o", seq)...)); err != nil {
					return err
				}
			}
		}
		v1Digest = hashBucket(rb)
		return nil
	})
	db := openDB(t, cfg)
	view(t, db, testShard, func(s *ShardTx) {
		d, err := s.Digest()
		if err != nil {
			t.Fatal(err)
		}
		if d.Requests != v1Digest {
			t.Errorf("request digest %x after migration, format 1 had %x", d.Requests, v1Digest)
		}
	})
	for seq := uint64(1); seq <= 3; seq++ {
		if out, ok := lookupInUpdate(t, db, testShard, "c", seq); !ok || out != fmt.Sprint("o", seq) {
			t.Fatalf("Request(c, %d) = %q %v", seq, out, ok)
		}
	}
	_ = db.View(func(tx *Tx) error {
		if f := tx.btx.Bucket(bucketMeta).Get(metaFormat); string(f) != fmt.Sprint(formatVersion) {
			t.Errorf("format %q after migration", f)
		}
		return nil
	})
	// Garbage collection by hlc works on the migrated records.
	collect(t, db, testShard, 0, 20, nil, 10)
	if _, ok := lookupInUpdate(t, db, testShard, "c", 2); ok {
		t.Fatal("seq 2 (hlc 20) survived collection up to 20")
	}
	if _, ok := lookupInUpdate(t, db, testShard, "c", 3); !ok {
		t.Fatal("seq 3 (hlc 30) was collected")
	}
}

// A damaged format-1 request record fails the migration: the file is
// refused, not half converted.
func TestOpenRefusesDamagedFormat1(t *testing.T) {
	cfg := format1File(t, func(rb *bolt.Bucket) error {
		return rb.Put([]byte("c\x00\x00\x00\x00\x00\x00\x00\x00\x01"), []byte("short"))
	})
	if _, err := Open(cfg, discardLogger(), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open = %v, want ErrCorrupt", err)
	}
	b, err := bolt.Open(cfg.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	_ = b.View(func(tx *bolt.Tx) error {
		if f := tx.Bucket(bucketMeta).Get(metaFormat); string(f) != "1" {
			t.Errorf("format %q after a refused migration, want 1", f)
		}
		if k, _ := tx.Bucket(testShard.bucket()).Bucket(bucketRequests).Cursor().First(); string(k[:1]) != "c" {
			t.Errorf("record %x rewritten by a refused migration", k)
		}
		return nil
	})
}

// BenchmarkRequestIndexMemory reports the heap the index takes per request
// id (64 clients, as the YCSB runs of bench/).
func BenchmarkRequestIndexMemory(b *testing.B) {
	const n = 1_000_000
	clients := make([][]byte, 64)
	for i := range clients {
		clients[i] = []byte(fmt.Sprintf("%032x", i))
	}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		x := newReqIndex()
		for i := 0; i < n; i++ {
			x.put(clients[i%len(clients)], uint64(i), uint64(i))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "bytes/id")
		runtime.KeepAlive(x)
	}
}

// format1File makes a database file of format 1 whose test shard's
// requests bucket fill fills, and returns its configuration.
func format1File(t *testing.T, fill func(*bolt.Bucket) error) Config {
	t.Helper()
	cfg := testConfig(t)
	db := openDB(t, cfg)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := bolt.Open(cfg.Path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Close() }()
	if err := b.Update(func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(metaFormat, []byte("1")); err != nil {
			return err
		}
		sb, err := tx.CreateBucket(testShard.bucket())
		if err != nil {
			return err
		}
		rb, err := sb.CreateBucket(bucketRequests)
		if err != nil {
			return err
		}
		return fill(rb)
	}); err != nil {
		t.Fatal(err)
	}
	return cfg
}
