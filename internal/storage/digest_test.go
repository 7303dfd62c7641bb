package storage

import (
	"fmt"
	"hash/fnv"
	"slices"
	"testing"
)

// digestOf returns the Digest of shard id in db.
func digestOf(t testing.TB, db *DB, id ShardID) Digest {
	t.Helper()
	var d Digest
	view(t, db, id, func(s *ShardTx) {
		var err error
		if d, err = s.Digest(); err != nil {
			t.Fatal(err)
		}
	})
	return d
}

// digestAt returns the DigestAt(at) of shard id in db.
func digestAt(t testing.TB, db *DB, id ShardID, at uint64) Digest {
	t.Helper()
	var d Digest
	view(t, db, id, func(s *ShardTx) {
		var err error
		if d, err = s.DigestAt(at); err != nil {
			t.Fatal(err)
		}
	})
	return d
}

// replicaState writes the same small shard state into db: a few keys with
// several versions, a tombstone, a key with a 0x00 byte, request ids and
// the applied index.
func replicaState(t testing.TB, db *DB) {
	t.Helper()
	putRecords(t, db, testShard,
		Record{Key: []byte("a"), Version: ver(10, "s1"), Value: []byte("a1")},
		Record{Key: []byte("a"), Version: ver(20, "s1"), Value: []byte("a2")},
		Record{Key: []byte("b"), Version: ver(11, "s2"), Value: []byte("b1")},
		Record{Key: []byte("b"), Version: ver(21, "s1"), Tombstone: true},
		Record{Key: []byte("c\x00d"), Version: ver(12, "s1"), Value: []byte("zero")},
	)
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.PutRequest("client", 1, 20, []byte("outcome")); err != nil {
			return err
		}
		return s.SetApplied(42, 21)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestDigestEqualForEqualStates(t *testing.T) {
	a, b := newDB(t), newDB(t)
	replicaState(t, a)
	replicaState(t, b)
	da, db := digestOf(t, a, testShard), digestOf(t, b, testShard)
	if da != db {
		t.Fatalf("equal states, different digests: %v and %v", da, db)
	}
	if da.Index != 42 || da.MaxHLC != 21 || da.Entries != 5 {
		t.Fatalf("digest = index %d, max HLC %d, %d entries; want 42, 21, 5", da.Index, da.MaxHLC, da.Entries)
	}
	if da.Requests == 0 {
		t.Fatal("request ids not hashed")
	}
	if d := digestOf(t, newDB(t), testShard); d != (Digest{}) {
		t.Fatalf("a shard that was never written: %+v, want the zero digest", d)
	}
}

// TestDigestSeesEveryDifference changes one thing at a time in a replica's
// state: each change must change the digest, and a change of versions must
// show in exactly the slot of its key.
func TestDigestSeesEveryDifference(t *testing.T) {
	base := newDB(t)
	replicaState(t, base)
	want := digestOf(t, base, testShard)
	for _, c := range []struct {
		name   string
		key    string // the key whose slot must differ; "" when no slot may
		change func(t *testing.T, db *DB)
	}{
		{"one value byte", "a", func(t *testing.T, db *DB) {
			if err := CorruptForTest(db, testShard, []byte("a"), []byte("a3")); err != nil {
				t.Fatal(err)
			}
		}},
		{"an extra old version", "c\x00d", func(t *testing.T, db *DB) {
			putRecords(t, db, testShard, Record{Key: []byte("c\x00d"), Version: ver(5, "s1"), Value: []byte("old")})
		}},
		{"a tombstone for a value", "c\x00d", func(t *testing.T, db *DB) {
			putRecords(t, db, testShard, Record{Key: []byte("c\x00d"), Version: ver(12, "s1"), Tombstone: true})
		}},
		{"a version's site", "a", func(t *testing.T, db *DB) {
			putRecords(t, db, testShard, Record{Key: []byte("a"), Version: ver(20, "s9"), Value: []byte("a2")})
			if err := db.Update(func(tx *Tx) error {
				return tx.btx.Bucket(testShard.bucket()).Bucket(bucketData).Delete(encodeVersionKey([]byte("a"), ver(20, "s1")))
			}); err != nil {
				t.Fatal(err)
			}
		}},
		{"a request id", "", func(t *testing.T, db *DB) {
			if err := db.Update(func(tx *Tx) error {
				s, _ := tx.Shard(testShard)
				return s.PutRequest("client", 2, 21, nil)
			}); err != nil {
				t.Fatal(err)
			}
		}},
		{"the newest HLC", "", func(t *testing.T, db *DB) {
			if err := db.Update(func(tx *Tx) error {
				s, _ := tx.Shard(testShard)
				return s.SetApplied(42, 22)
			}); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			db := newDB(t)
			replicaState(t, db)
			c.change(t, db)
			got := digestOf(t, db, testShard)
			if got == want || got.Sum() == want.Sum() {
				t.Fatalf("digest unchanged: %v", got)
			}
			var slots []int
			if c.key != "" {
				slots = []int{SlotOf([]byte(c.key))}
			}
			if diff := got.DiffSlots(want); !slices.Equal(diff, slots) {
				t.Fatalf("differing slots %v, want %v", diff, slots)
			}
		})
	}
}

func TestCorruptForTestLeavesTheAppliedIndex(t *testing.T) {
	db := newDB(t)
	replicaState(t, db)
	if err := CorruptForTest(db, testShard, []byte("a"), []byte("bad")); err != nil {
		t.Fatal(err)
	}
	if err := CorruptForTest(db, testShard, []byte("new"), []byte("bad")); err != nil {
		t.Fatal(err)
	}
	view(t, db, testShard, func(s *ShardTx) {
		if idx, hlc := s.Applied(); idx != 42 || hlc != 21 {
			t.Errorf("applied = %d, %d; want 42, 21", idx, hlc)
		}
		for _, k := range []string{"a", "new"} {
			r, ok, err := s.Latest([]byte(k), false)
			if err != nil || !ok || string(r.Value) != "bad" {
				t.Errorf("Latest(%s) = %s, %v, %v", k, fmtRecord(r), ok, err)
			}
		}
	})
	if err := CorruptForTest(db, ShardID{Keyspace: "ks", Shard: 99}, []byte("a"), nil); err == nil {
		t.Error("corrupting a shard that is not stored succeeded")
	}
}

// TestDigestAtIgnoresCollectionHistory: two replicas whose readers see the
// same data at an HLC, but whose garbage collection ran at different times
// (one still holds an old version and a tombstone the other collected),
// agree under DigestAt and differ under Digest. A version above the HLC is
// left out; one at or below it is not.
func TestDigestAtIgnoresCollectionHistory(t *testing.T) {
	early, late := newDB(t), newDB(t)
	current := []Record{
		{Key: []byte("a"), Version: ver(20, "s1"), Value: []byte("a2")},
		{Key: []byte("c"), Version: ver(15, "s2"), Value: []byte("c1")},
	}
	putRecords(t, early, testShard, current...)
	putRecords(t, late, testShard, current...)
	putRecords(t, late, testShard,
		Record{Key: []byte("a"), Version: ver(10, "s1"), Value: []byte("a1")},
		Record{Key: []byte("b"), Version: ver(5, "s1"), Value: []byte("b1")},
		Record{Key: []byte("b"), Version: ver(8, "s1"), Tombstone: true},
	)
	if digestOf(t, early, testShard) == digestOf(t, late, testShard) {
		t.Fatal("Digest does not see the collected versions")
	}
	if a, b := digestAt(t, early, testShard, 100), digestAt(t, late, testShard, 100); a != b || a.Entries != 2 {
		t.Fatalf("DigestAt: %v and %v, want equal with 2 entries", a, b)
	}
	// A newer write, above the HLC compared at, is not seen; at its own
	// HLC it is.
	putRecords(t, late, testShard, Record{Key: []byte("c"), Version: ver(200, "s1"), Value: []byte("c2")})
	if a, b := digestAt(t, early, testShard, 100), digestAt(t, late, testShard, 100); a != b {
		t.Fatalf("DigestAt(100) sees a version at 200: %v and %v", a, b)
	}
	a, b := digestAt(t, early, testShard, 200), digestAt(t, late, testShard, 200)
	if diff := a.DiffSlots(b); !slices.Equal(diff, []int{SlotOf([]byte("c"))}) {
		t.Fatalf("DigestAt(200) differs in slots %v, want the slot of c", diff)
	}
}

// TestDigestNewestSeesDeletes: two sites that agree on the live keys but
// not on a delete look the same to DigestAt and differ in DigestNewest, in
// the slot of the deleted key (anti-entropy compares DigestNewest).
func TestDigestNewestSeesDeletes(t *testing.T) {
	a, b := newDB(t), newDB(t)
	same := []Record{
		{Key: []byte("x"), Version: ver(10, "s1"), Value: []byte("x")},
		{Key: []byte("y"), Version: ver(11, "s2"), Tombstone: true},
	}
	putRecords(t, a, testShard, same...)
	putRecords(t, b, testShard, same...)
	putRecords(t, b, testShard, Record{Key: []byte("y"), Version: ver(12, "s3"), Tombstone: true})
	if da, db := digestAt(t, a, testShard, 100), digestAt(t, b, testShard, 100); da != db {
		t.Fatalf("DigestAt differs on a delete: %v and %v", da, db)
	}
	newest := func(db *DB) Digest {
		var d Digest
		view(t, db, testShard, func(s *ShardTx) {
			var err error
			if d, err = s.DigestNewest(); err != nil {
				t.Fatal(err)
			}
		})
		return d
	}
	if diff := newest(a).DiffSlots(newest(b)); !slices.Equal(diff, []int{SlotOf([]byte("y"))}) {
		t.Fatalf("DigestNewest differs in slots %v, want the slot of y", diff)
	}
}

// TestSlotOfSpreadsOneShard: the keys of one shard (placement hashes keys
// with FNV-1a modulo the shard count) fill every slot, so that a slot
// narrows a difference down to about 1/DigestSlots of a shard.
func TestSlotOfSpreadsOneShard(t *testing.T) {
	seen := map[int]int{}
	for i := 0; len(seen) < DigestSlots && i < 100000; i++ {
		k := []byte(fmt.Sprintf("user%08d", i))
		h := fnv.New64a()
		_, _ = h.Write(k)
		if h.Sum64()%16 != 3 {
			continue
		}
		s := SlotOf(k)
		if s < 0 || s >= DigestSlots {
			t.Fatalf("SlotOf(%s) = %d", k, s)
		}
		seen[s]++
	}
	if len(seen) != DigestSlots {
		t.Fatalf("the keys of one shard of 16 use %d of %d slots", len(seen), DigestSlots)
	}
}

// digestBenchShard fills a shard of 100,000 keys with 100-byte values,
// one version each.
func digestBenchShard(b *testing.B) *DB {
	db := newDB(b)
	val := make([]byte, 100)
	for lo := 0; lo < digestBenchKeys; lo += 10000 {
		recs := make([]Record, 0, 10000)
		for i := lo; i < lo+10000; i++ {
			recs = append(recs, Record{Key: []byte(fmt.Sprintf("user%012d", i)), Version: ver(uint64(i+1), "s1"), Value: val})
		}
		putRecords(b, db, testShard, recs...)
	}
	return db
}

const digestBenchKeys = 100000

// BenchmarkDigest measures the replica digest of a shard of 100,000 keys
// (docs/adr/012-replica-digests.md quotes it).
func BenchmarkDigest(b *testing.B) {
	db := digestBenchShard(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d := digestOf(b, db, testShard); d.Entries != digestBenchKeys {
			b.Fatalf("%d entries", d.Entries)
		}
	}
}

// BenchmarkDigestAt measures DigestAt over the same shard.
func BenchmarkDigestAt(b *testing.B) {
	db := digestBenchShard(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		digestAt(b, db, testShard, digestBenchKeys/2)
	}
}
