package storage

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

func rec(key string, hlc uint64, site, value string) Record {
	return Record{Key: []byte(key), Version: ver(hlc, site), Value: []byte(value)}
}

func tomb(key string, hlc uint64, site string) Record {
	return Record{Key: []byte(key), Version: ver(hlc, site), Tombstone: true}
}

func TestLatest(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard,
		rec("k", 10, "a", "v10"),
		rec("k", 30, "a", "v30"),
		rec("k", 20, "b", "v20"),
		rec("k", 30, "b", "v30b"), // same hlc, larger site: wins
		rec("k\x00", 99, "a", "other"),
		rec("j", 99, "a", "other"),
		tomb("dead", 5, "a"),
		rec("dead", 4, "a", "old"),
		rec("", 1, "a", "empty key"),
	)
	tests := []struct {
		key      string
		keysOnly bool
		want     Record
		found    bool
	}{
		{"k", false, rec("k", 30, "b", "v30b"), true},
		{"k", true, Record{Key: []byte("k"), Version: ver(30, "b")}, true},
		{"k\x00", false, rec("k\x00", 99, "a", "other"), true},
		{"dead", false, tomb("dead", 5, "a"), true},
		{"", false, rec("", 1, "a", "empty key"), true},
		{"missing", false, Record{}, false},
		{"k\x01", false, Record{}, false},
		{"kk", false, Record{}, false},
		{"de", false, Record{}, false},
	}
	view(t, db, testShard, func(s *ShardTx) {
		for _, tc := range tests {
			got, ok, err := s.Latest([]byte(tc.key), tc.keysOnly)
			if err != nil {
				t.Fatalf("Latest(%q): %v", tc.key, err)
			}
			if ok != tc.found {
				t.Errorf("Latest(%q) found = %v, want %v", tc.key, ok, tc.found)
				continue
			}
			if ok && !recordsEqual(got, tc.want) {
				t.Errorf("Latest(%q, keysOnly=%v) = %s, want %s", tc.key, tc.keysOnly, fmtRecord(got), fmtRecord(tc.want))
			}
			if tc.keysOnly && got.Value != nil {
				t.Errorf("Latest(%q, keysOnly) returned value %q", tc.key, got.Value)
			}
		}
	})
}

func TestLatestAt(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard,
		rec("k", 10, "a", "v10"),
		rec("k", 20, "a", "v20a"),
		rec("k", 20, "c", "v20c"),
		tomb("k", 30, "a"),
		rec("k", 40, "a", "v40"),
		rec("k", math.MaxUint64, "a", "vmax"),
		rec("k\x00", 5, "a", "next key"),
		rec("j", 50, "a", "prev key"),
	)
	tests := []struct {
		at    uint64
		want  Record
		found bool
	}{
		{0, Record{}, false},
		{9, Record{}, false},
		{10, rec("k", 10, "a", "v10"), true},
		{19, rec("k", 10, "a", "v10"), true},
		{20, rec("k", 20, "c", "v20c"), true},
		{29, rec("k", 20, "c", "v20c"), true},
		{30, tomb("k", 30, "a"), true},
		{39, tomb("k", 30, "a"), true},
		{40, rec("k", 40, "a", "v40"), true},
		{math.MaxUint64 - 1, rec("k", 40, "a", "v40"), true},
		{math.MaxUint64, rec("k", math.MaxUint64, "a", "vmax"), true},
	}
	view(t, db, testShard, func(s *ShardTx) {
		for _, tc := range tests {
			got, ok, err := s.LatestAt([]byte("k"), tc.at)
			if err != nil {
				t.Fatalf("LatestAt(%d): %v", tc.at, err)
			}
			if ok != tc.found || (ok && !recordsEqual(got, tc.want)) {
				t.Errorf("LatestAt(k, %d) = %s %v, want %s %v", tc.at, fmtRecord(got), ok, fmtRecord(tc.want), tc.found)
			}
		}
		// A key with no version at or below the bound must not leak the
		// next key's version.
		if got, ok, err := s.LatestAt([]byte("k"), 4); err != nil || ok {
			t.Errorf("LatestAt(k, 4) = %s %v %v", fmtRecord(got), ok, err)
		}
		if got, ok, err := s.LatestAt([]byte("missing"), math.MaxUint64); err != nil || ok {
			t.Errorf("LatestAt(missing) = %s %v %v", fmtRecord(got), ok, err)
		}
	})
}

// LatestAt agrees with a brute-force search over History for random data.
func TestLatestAtModel(t *testing.T) {
	db := newDB(t)
	r := rand.New(rand.NewPCG(5, 6))
	var recs []Record
	keys := []string{"", "a", "a\x00", "ab", "b"}
	for i := 0; i < 200; i++ {
		k := keys[r.IntN(len(keys))]
		recs = append(recs, Record{Key: []byte(k), Version: ver(uint64(r.IntN(50)), trickySites[r.IntN(4)]), Value: []byte(fmt.Sprint(i)), Tombstone: r.IntN(5) == 0})
	}
	putRecords(t, db, testShard, recs...)
	view(t, db, testShard, func(s *ShardTx) {
		for _, k := range keys {
			hist, err := s.History([]byte(k), math.MaxInt)
			if err != nil {
				t.Fatal(err)
			}
			for at := uint64(0); at <= 51; at++ {
				var want *Record
				for i := range hist {
					if hist[i].Version.HLC <= at {
						want = &hist[i]
						break
					}
				}
				got, ok, err := s.LatestAt([]byte(k), at)
				if err != nil {
					t.Fatal(err)
				}
				if ok != (want != nil) || (ok && !recordsEqual(got, *want)) {
					t.Fatalf("LatestAt(%q, %d) = %s %v, want %v", k, at, fmtRecord(got), ok, want)
				}
			}
		}
	})
}

func TestPutOverwritesSameVersion(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard, rec("k", 5, "a", "first"))
	putRecords(t, db, testShard, rec("k", 5, "a", "second"))
	putRecords(t, db, testShard, tomb("k", 6, "a"))
	putRecords(t, db, testShard, rec("k", 6, "a", "revived"))
	checkRecords(t, "all versions", allVersions(t, db, testShard), []Record{
		rec("k", 6, "a", "revived"),
		rec("k", 5, "a", "second"),
	})
}

func TestHistory(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard,
		rec("k", 1, "a", "1"),
		rec("k", 3, "a", "3"),
		tomb("k", 2, "b"),
		rec("k", 3, "b", "3b"),
		rec("k\x00", 9, "a", "x"),
		rec("ka", 9, "a", "x"),
		rec("j", 9, "a", "x"),
	)
	all := []Record{rec("k", 3, "b", "3b"), rec("k", 3, "a", "3"), tomb("k", 2, "b"), rec("k", 1, "a", "1")}
	view(t, db, testShard, func(s *ShardTx) {
		for _, limit := range []int{-1, 0, 1, 2, 3, 4, 5, 100} {
			got, err := s.History([]byte("k"), limit)
			if err != nil {
				t.Fatal(err)
			}
			want := all[:max(0, min(limit, len(all)))]
			checkRecords(t, fmt.Sprintf("History(k, %d)", limit), got, want)
		}
		got, err := s.History([]byte("missing"), 10)
		if err != nil || len(got) != 0 {
			t.Errorf("History(missing) = %s, %v", fmtRecords(got), err)
		}
		// HistoryBytes stops at the version whose value crosses the bound
		// (values of 2, 1, 0 and 1 bytes), and always returns one.
		for maxBytes, n := range map[int]int{1: 1, 2: 2, 3: 4, 100: 4} {
			got, err := s.HistoryBytes([]byte("k"), 100, maxBytes)
			if err != nil {
				t.Fatal(err)
			}
			checkRecords(t, fmt.Sprintf("HistoryBytes(k, 100, %d)", maxBytes), got, all[:n])
		}
	})
}

// scanKeys returns the user keys of recs.
func scanKeys(recs []Record) []string {
	out := make([]string, len(recs))
	for i, r := range recs {
		out[i] = string(r.Key)
	}
	return out
}

func TestScan(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard,
		rec("", 1, "a", "empty"),
		rec("a", 1, "a", "a1"),
		rec("a", 2, "a", "a2"),
		rec("a\x00", 1, "a", "a-nul"),
		tomb("b", 5, "a"), // deleted
		rec("b", 4, "a", "b-old"),
		rec("c", 5, "a", "c-new"), // resurrected
		tomb("c", 4, "a"),
		tomb("d", 1, "a"), // only a tombstone
		rec("e", 7, "a", "e"),
		rec("e", 7, "b", "e-wins"),
		tomb("e", 6, "z"),
		rec("f", 1, "a", "f"),
		tomb("g", 3, "a"),
		tomb("h", 3, "a"),
	)
	live := []string{"", "a", "a\x00", "c", "e", "f"}
	values := map[string]string{"": "empty", "a": "a2", "a\x00": "a-nul", "c": "c-new", "e": "e-wins", "f": "f"}
	tests := []struct {
		start, end string
		limit      int
		want       []string
		more       bool
	}{
		{"", "", 100, live, false},
		{"", "", 6, live, false},
		{"", "", 5, live[:5], true},
		{"", "", 1, live[:1], true},
		{"", "", 0, nil, false},
		{"", "", -1, nil, false},
		{"a", "", 100, []string{"a", "a\x00", "c", "e", "f"}, false},
		{"a\x00", "", 100, []string{"a\x00", "c", "e", "f"}, false},
		{"a\x01", "", 100, []string{"c", "e", "f"}, false},
		{"b", "e", 100, []string{"c"}, false},
		{"b", "e", 1, []string{"c"}, false}, // d is dead, e is out of range
		{"", "c", 100, []string{"", "a", "a\x00"}, false},
		{"", "a\x00", 100, []string{"", "a"}, false},
		{"", "a", 100, []string{""}, false},
		{"c", "c", 100, nil, false},
		{"c", "c\x00", 100, []string{"c"}, false},
		{"e", "f", 1, []string{"e"}, false},
		{"e", "", 1, []string{"e"}, true},
		{"f", "", 1, []string{"f"}, false}, // g and h are tombstones: nothing remains
		{"g", "", 10, nil, false},
		{"z", "", 10, nil, false},
		{"d", "a", 10, nil, false},
	}
	view(t, db, testShard, func(s *ShardTx) {
		for _, tc := range tests {
			for _, keysOnly := range []bool{false, true} {
				name := fmt.Sprintf("Scan(%q, %q, %d, keysOnly=%v)", tc.start, tc.end, tc.limit, keysOnly)
				got, more, err := s.Scan([]byte(tc.start), []byte(tc.end), tc.limit, keysOnly)
				if err != nil {
					t.Fatalf("%s: %v", name, err)
				}
				if keys := scanKeys(got); !slices.Equal(keys, tc.want) && (len(keys) != 0 || len(tc.want) != 0) {
					t.Errorf("%s keys = %q, want %q", name, keys, tc.want)
				}
				if more != tc.more {
					t.Errorf("%s more = %v, want %v", name, more, tc.more)
				}
				for _, r := range got {
					if r.Tombstone {
						t.Errorf("%s returned tombstone %q", name, r.Key)
					}
					if keysOnly && r.Value != nil {
						t.Errorf("%s returned value %q for %q", name, r.Value, r.Key)
					}
					if !keysOnly && string(r.Value) != values[string(r.Key)] {
						t.Errorf("%s value of %q = %q, want %q", name, r.Key, r.Value, values[string(r.Key)])
					}
				}
			}
		}
	})
	// nil start means from the beginning.
	view(t, db, testShard, func(s *ShardTx) {
		got, _, err := s.Scan(nil, nil, 100, false)
		if err != nil || !slices.Equal(scanKeys(got), live) {
			t.Errorf("Scan(nil, nil) = %q, %v", scanKeys(got), err)
		}
	})
}

// Paging with Scan (restart after the last key returned) visits every live
// key exactly once, in order, and the last page reports more=false.
func TestScanPaging(t *testing.T) {
	db := newDB(t)
	r := rand.New(rand.NewPCG(7, 8))
	var recs []Record
	liveSet := map[string]bool{}
	for i := 0; i < 150; i++ {
		k := string(randomKey(r))
		n := 1 + r.IntN(3)
		for j := 0; j < n; j++ {
			recs = append(recs, Record{Key: []byte(k), Version: ver(uint64(j+1), "a"), Value: []byte(k), Tombstone: r.IntN(3) == 0})
		}
		// The last put of a key at the highest hlc decides liveness; compute
		// it after all puts below.
	}
	putRecords(t, db, testShard, recs...)
	newest := map[string]Record{}
	for _, rc := range recs {
		if cur, ok := newest[string(rc.Key)]; !ok || cur.Version.Less(rc.Version) {
			newest[string(rc.Key)] = rc
		} else if cur.Version == rc.Version {
			newest[string(rc.Key)] = rc // later Put of the same version overwrites
		}
	}
	for k, rc := range newest {
		if !rc.Tombstone {
			liveSet[k] = true
		}
	}
	var want []string
	for k := range liveSet {
		want = append(want, k)
	}
	slices.Sort(want)

	for _, pageSize := range []int{1, 2, 7, 1000} {
		var got []string
		start := []byte{}
		pages := 0
		view(t, db, testShard, func(s *ShardTx) {
			for {
				page, more, err := s.Scan(start, nil, pageSize, true)
				if err != nil {
					t.Fatal(err)
				}
				pages++
				got = append(got, scanKeys(page)...)
				if !more {
					break
				}
				if len(page) != pageSize {
					t.Fatalf("page of %d with more=true, page size %d", len(page), pageSize)
				}
				start = append(bytes.Clone(page[len(page)-1].Key), 0x00) // next key after the last one
				if pages > 10000 {
					t.Fatal("paging does not terminate")
				}
			}
		})
		if !slices.Equal(got, want) {
			t.Fatalf("page size %d: got %d keys %q, want %d %q", pageSize, len(got), got, len(want), want)
		}
	}
}

// A shard never written reads as empty in a read-only transaction.
func TestReadMissingShard(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, ShardID{Keyspace: "other", Shard: 1}, rec("k", 1, "a", "v"))
	view(t, db, testShard, func(s *ShardTx) {
		if r, ok, err := s.Latest([]byte("k"), false); ok || err != nil {
			t.Errorf("Latest = %s %v %v", fmtRecord(r), ok, err)
		}
		if r, ok, err := s.LatestAt([]byte("k"), math.MaxUint64); ok || err != nil {
			t.Errorf("LatestAt = %s %v %v", fmtRecord(r), ok, err)
		}
		if h, err := s.History([]byte("k"), 10); len(h) != 0 || err != nil {
			t.Errorf("History = %s %v", fmtRecords(h), err)
		}
		if recs, more, err := s.Scan(nil, nil, 10, false); len(recs) != 0 || more || err != nil {
			t.Errorf("Scan = %s %v %v", fmtRecords(recs), more, err)
		}
		if idx, hlc := s.Applied(); idx != 0 || hlc != 0 {
			t.Errorf("Applied = %d %d", idx, hlc)
		}
		if out, ok, _ := s.Request("c", 1); ok || out != nil {
			t.Errorf("Request = %q %v", out, ok)
		}
	})
	// Reading did not create it.
	for _, name := range boltBucketNames(t, db) {
		if name == string(testShard.bucket()) {
			t.Fatal("a read-only Shard call created the shard")
		}
	}
	// Same shard in the same keyspace with a different number is distinct.
	view(t, db, ShardID{Keyspace: "other", Shard: 2}, func(s *ShardTx) {
		if _, ok, _ := s.Latest([]byte("k"), false); ok {
			t.Error("shard other/2 sees other/1's data")
		}
	})
}

// A shard written but then read in a write transaction (created empty) reads
// as empty too.
func TestEmptyShardInUpdate(t *testing.T) {
	db := newDB(t)
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if _, ok, err := s.Latest([]byte("k"), false); ok || err != nil {
			return fmt.Errorf("Latest on empty shard: %v %v", ok, err)
		}
		if recs, more, err := s.Scan(nil, nil, 10, false); len(recs) != 0 || more || err != nil {
			return fmt.Errorf("Scan on empty shard: %v %v %v", recs, more, err)
		}
		if idx, hlc := s.Applied(); idx != 0 || hlc != 0 {
			return fmt.Errorf("Applied = %d %d", idx, hlc)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestApplied(t *testing.T) {
	db := newDB(t)
	tests := []struct{ index, hlc uint64 }{{1, 2}, {0, 0}, {100, 1 << 40}, {math.MaxUint64, math.MaxUint64}, {7, 3}}
	for _, tc := range tests {
		err := db.Update(func(tx *Tx) error {
			s, err := tx.Shard(testShard)
			if err != nil {
				return err
			}
			if err := s.SetApplied(tc.index, tc.hlc); err != nil {
				return err
			}
			// Visible inside the same transaction.
			if idx, hlc := s.Applied(); idx != tc.index || hlc != tc.hlc {
				return fmt.Errorf("in tx Applied = %d %d", idx, hlc)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		view(t, db, testShard, func(s *ShardTx) {
			if idx, hlc := s.Applied(); idx != tc.index || hlc != tc.hlc {
				t.Errorf("Applied = %d %d, want %d %d", idx, hlc, tc.index, tc.hlc)
			}
		})
	}
	// Another shard is unaffected.
	view(t, db, ShardID{Keyspace: testShard.Keyspace, Shard: testShard.Shard + 1}, func(s *ShardTx) {
		if idx, hlc := s.Applied(); idx != 0 || hlc != 0 {
			t.Errorf("other shard Applied = %d %d", idx, hlc)
		}
	})
}

func TestRequests(t *testing.T) {
	db := newDB(t)
	tests := []struct {
		client  string
		seq     uint64
		hlc     uint64
		outcome []byte
	}{
		{"c1", 1, 10, []byte("ok")},
		{"c1", 2, 11, []byte{}},
		{"c1", 256, 12, []byte{0x00, 0xFF}},
		{"c2", 1, 13, []byte("other client")},
		{"", 0, 0, []byte("empty client")},
		{"c", math.MaxUint64, math.MaxUint64, bytes.Repeat([]byte("x"), 5000)},
	}
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		for _, tc := range tests {
			if err := s.PutRequest(tc.client, tc.seq, tc.hlc, tc.outcome); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, db, testShard, func(s *ShardTx) {
		for _, tc := range tests {
			out, ok, _ := s.Request(tc.client, tc.seq)
			if !ok || !bytes.Equal(out, tc.outcome) {
				t.Errorf("Request(%q, %d) = %q %v, want %q", tc.client, tc.seq, out, ok, tc.outcome)
			}
		}
		for _, miss := range []struct {
			client string
			seq    uint64
		}{{"c1", 3}, {"c3", 1}, {"c", 1}, {"c1\x00", 1}} {
			if out, ok, _ := s.Request(miss.client, miss.seq); ok {
				t.Errorf("Request(%q, %d) = %q, want not found", miss.client, miss.seq, out)
			}
		}
	})
	// Overwrite.
	err = db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		return s.PutRequest("c1", 1, 99, []byte("again"))
	})
	if err != nil {
		t.Fatal(err)
	}
	view(t, db, testShard, func(s *ShardTx) {
		if out, ok, _ := s.Request("c1", 1); !ok || string(out) != "again" {
			t.Errorf("after overwrite Request = %q %v", out, ok)
		}
	})
}

// Byte slices handed out outlive their transaction and are not shared with
// the database.
func TestReturnedSlicesAreCopies(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard, rec("key", 1, "a", "value-1"), rec("key2", 1, "a", "value-2"))
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		// Enough data that the buckets live in their own pages of the
		// memory map (bbolt copies small inline buckets to the heap).
		for i := 0; i < 100; i++ {
			if err := s.PutRequest("filler", uint64(i), 1, bytes.Repeat([]byte{'f'}, 100)); err != nil {
				return err
			}
			if err := s.Put(rec(fmt.Sprintf("filler%03d", i), 1, "a", string(bytes.Repeat([]byte{'f'}, 100)))); err != nil {
				return err
			}
		}
		return s.PutRequest("c", 1, 1, []byte("outcome"))
	})
	if err != nil {
		t.Fatal(err)
	}
	var latest Record
	var scanned, hist []Record
	var outcome []byte
	view(t, db, testShard, func(s *ShardTx) {
		var err error
		outcome, _, _ = s.Request("c", 1)
		if latest, _, err = s.Latest([]byte("key"), false); err != nil {
			t.Fatal(err)
		}
		if scanned, _, err = s.Scan([]byte("key"), []byte("key3"), 10, false); err != nil {
			t.Fatal(err)
		}
		if hist, err = s.History([]byte("key2"), 10); err != nil {
			t.Fatal(err)
		}
	})
	// Churn the database: overwrite and grow it so pages move.
	for i := 0; i < 50; i++ {
		var recs []Record
		for j := 0; j < 50; j++ {
			recs = append(recs, rec(fmt.Sprintf("key%d-%d", i, j), 1, "a", string(bytes.Repeat([]byte{'Z'}, 200))))
		}
		recs = append(recs, rec("key", 1, "a", "CHANGED"), rec("key2", 1, "a", "CHANGED"))
		putRecords(t, db, testShard, recs...)
	}
	if string(latest.Key) != "key" || string(latest.Value) != "value-1" {
		t.Errorf("Latest result changed: %s", fmtRecord(latest))
	}
	if len(scanned) != 2 || string(scanned[0].Value) != "value-1" || string(scanned[1].Value) != "value-2" || string(scanned[1].Key) != "key2" {
		t.Errorf("Scan result changed: %s", fmtRecords(scanned))
	}
	if len(hist) != 1 || string(hist[0].Value) != "value-2" {
		t.Errorf("History result changed: %s", fmtRecords(hist))
	}
	if string(outcome) != "outcome" {
		t.Errorf("Request result changed: %q", outcome)
	}
	// Returned slices are writable and writing them does not change the
	// stored data. (Writing into bbolt's read-only memory map would fault.)
	latest.Value[0] = 'X'
	latest.Key[0] = 'X'
	scanned[1].Value[0] = 'X'
	hist[0].Key[0] = 'X'
	outcome[0] = 'X'
	view(t, db, testShard, func(s *ShardTx) {
		r, _, _ := s.Latest([]byte("key"), false)
		if string(r.Value) != "CHANGED" {
			t.Errorf("stored value = %q", r.Value)
		}
		if out, _, _ := s.Request("c", 1); string(out) != "outcome" {
			t.Errorf("stored request outcome = %q", out)
		}
	})
}

// TestLatestAtStamp: a snapshot at a stamp sees, per key, the newest (by
// last-writer-wins) of the versions applied here at or below the stamp: a
// version from another site counts from its stamp, not its HLC, and the
// digest other sites compare ignores stamps.
func TestLatestAtStamp(t *testing.T) {
	db := newDB(t)
	id := testShard
	put := func(r Record) {
		t.Helper()
		if err := db.Update(func(tx *Tx) error {
			s, err := tx.Shard(id)
			if err != nil {
				return err
			}
			return s.Put(r)
		}); err != nil {
			t.Fatal(err)
		}
	}
	at := func(stamp uint64) (Record, bool) {
		t.Helper()
		var r Record
		var ok bool
		if err := db.View(func(tx *Tx) error {
			s, err := tx.Shard(id)
			if err != nil {
				return err
			}
			r, ok, err = s.LatestAtStamp([]byte("k"), stamp)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return r, ok
	}
	put(Record{Key: []byte("k"), Version: ver(100, "s1"), Value: []byte("local")})
	// A remote version newer by HLC, applied here at stamp 300.
	put(Record{Key: []byte("k"), Version: ver(200, "s2"), Value: []byte("remote"), Stamp: 300})
	if _, ok := at(99); ok {
		t.Fatal("snapshot below every version found one")
	}
	for _, c := range []struct {
		stamp uint64
		want  string
	}{{100, "local"}, {250, "local"}, {299, "local"}, {300, "remote"}, {1000, "remote"}} {
		r, ok := at(c.stamp)
		if !ok || string(r.Value) != c.want {
			t.Fatalf("at %d: %q %v, want %q", c.stamp, r.Value, ok, c.want)
		}
	}
	if r, _ := at(300); r.Stamp != 300 || r.StampOrHLC() != 300 {
		t.Fatalf("stamp %d", r.Stamp)
	}
}
