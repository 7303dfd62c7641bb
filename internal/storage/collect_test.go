package storage

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// collect runs one Collect call in its own Update.
func collect(t *testing.T, db *DB, id ShardID, cutoff, reqCutoff uint64, start []byte, maxKeys int) (next []byte, removed int) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		next, removed, err = s.Collect(cutoff, reqCutoff, start, maxKeys)
		return err
	})
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	return next, removed
}

// expectSurvivors applies the documented GC rule to recs: a version is
// removed iff a newer version of its key has hlc <= cutoff; a newest version
// that is a tombstone with hlc <= cutoff is removed with all older ones.
// It returns the survivors in storage order.
func expectSurvivors(recs []Record, cutoff uint64) []Record {
	byKey := map[string][]Record{}
	for _, r := range recs {
		byKey[string(r.Key)] = append(byKey[string(r.Key)], r)
	}
	var keys []string
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var out []Record
	for _, k := range keys {
		vs := byKey[k]
		slices.SortFunc(vs, func(a, b Record) int { return -a.Version.Compare(b.Version) })
		vs = slices.CompactFunc(vs, func(a, b Record) bool { return a.Version == b.Version })
		if vs[0].Tombstone && vs[0].Version.HLC <= cutoff {
			continue
		}
		for i, v := range vs {
			shadowed := false
			for _, newer := range vs[:i] {
				if newer.Version.HLC <= cutoff {
					shadowed = true
				}
			}
			if !shadowed {
				out = append(out, v)
			}
		}
	}
	return out
}

func TestCollectRules(t *testing.T) {
	tests := []struct {
		name    string
		recs    []Record
		cutoff  uint64
		want    []Record
		removed int
	}{
		{
			name:   "single live version is kept however old",
			recs:   []Record{rec("k", 1, "a", "v")},
			cutoff: 100,
			want:   []Record{rec("k", 1, "a", "v")},
		},
		{
			name:    "versions shadowed by a version at or before the cutoff are removed",
			recs:    []Record{rec("k", 10, "a", "10"), rec("k", 20, "a", "20"), rec("k", 30, "a", "30")},
			cutoff:  20,
			want:    []Record{rec("k", 30, "a", "30"), rec("k", 20, "a", "20")},
			removed: 1,
		},
		{
			name:   "a newer version after the cutoff does not shadow",
			recs:   []Record{rec("k", 10, "a", "10"), rec("k", 21, "a", "21")},
			cutoff: 20,
			want:   []Record{rec("k", 21, "a", "21"), rec("k", 10, "a", "10")},
		},
		{
			name:    "cutoff exactly at the newest version",
			recs:    []Record{rec("k", 10, "a", "10"), rec("k", 20, "a", "20")},
			cutoff:  20,
			want:    []Record{rec("k", 20, "a", "20")},
			removed: 1,
		},
		{
			name:   "cutoff one below the newest version",
			recs:   []Record{rec("k", 10, "a", "10"), rec("k", 20, "a", "20")},
			cutoff: 19,
			want:   []Record{rec("k", 20, "a", "20"), rec("k", 10, "a", "10")},
		},
		{
			name:    "old tombstone removes the key entirely",
			recs:    []Record{rec("k", 10, "a", "10"), rec("k", 15, "a", "15"), tomb("k", 20, "a")},
			cutoff:  20,
			want:    nil,
			removed: 3,
		},
		{
			name:    "recent tombstone is kept, versions it shadows are not before the cutoff",
			recs:    []Record{rec("k", 10, "a", "10"), rec("k", 15, "a", "15"), tomb("k", 25, "a")},
			cutoff:  20,
			want:    []Record{tomb("k", 25, "a"), rec("k", 15, "a", "15")},
			removed: 1,
		},
		{
			name:    "old tombstone below a live newest version is just shadowed",
			recs:    []Record{rec("k", 10, "a", "10"), tomb("k", 15, "a"), rec("k", 18, "a", "18")},
			cutoff:  20,
			want:    []Record{rec("k", 18, "a", "18")},
			removed: 2,
		},
		{
			name:    "tombstone that is not newest is kept while inside the window",
			recs:    []Record{rec("k", 5, "a", "5"), tomb("k", 15, "a"), rec("k", 25, "a", "25")},
			cutoff:  20,
			want:    []Record{rec("k", 25, "a", "25"), tomb("k", 15, "a")},
			removed: 1,
		},
		{
			name:    "equal hlc: the larger site shadows the smaller",
			recs:    []Record{rec("k", 10, "a", "a"), rec("k", 10, "b", "b")},
			cutoff:  10,
			want:    []Record{rec("k", 10, "b", "b")},
			removed: 1,
		},
		{
			name:    "equal hlc after the cutoff: nothing shadowed",
			recs:    []Record{rec("k", 10, "a", "a"), rec("k", 10, "b", "b")},
			cutoff:  9,
			want:    []Record{rec("k", 10, "b", "b"), rec("k", 10, "a", "a")},
			removed: 0,
		},
		{
			name: "keys are independent, including prefix keys",
			recs: []Record{
				rec("a", 1, "a", "a1"), rec("a", 2, "a", "a2"),
				tomb("a\x00", 3, "a"), rec("a\x00", 1, "a", "x"),
				rec("ab", 50, "a", "ab50"), rec("ab", 1, "a", "ab1"),
				rec("", 1, "a", "e1"), rec("", 2, "a", "e2"),
			},
			cutoff: 10,
			want: []Record{
				rec("", 2, "a", "e2"),
				rec("a", 2, "a", "a2"),
				rec("ab", 50, "a", "ab50"), rec("ab", 1, "a", "ab1"),
			},
			removed: 4,
		},
		{
			name:   "cutoff zero removes only what hlc 0 shadows",
			recs:   []Record{rec("k", 0, "a", "0"), rec("k", 1, "a", "1"), tomb("j", 0, "a")},
			cutoff: 0,
			want:   []Record{rec("k", 1, "a", "1"), rec("k", 0, "a", "0")},
			// j's tombstone has hlc 0 <= cutoff 0
			removed: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if exp := expectSurvivors(tc.recs, tc.cutoff); !slices.EqualFunc(exp, tc.want, recordsEqual) {
				t.Fatalf("test case disagrees with the model: model %s", fmtRecords(exp))
			}
			db := newDB(t)
			putRecords(t, db, testShard, tc.recs...)
			next, removed := collect(t, db, testShard, tc.cutoff, 0, nil, 1000)
			if next != nil {
				t.Errorf("next = %q, want nil", next)
			}
			if removed != tc.removed {
				t.Errorf("removed = %d, want %d", removed, tc.removed)
			}
			checkRecords(t, "survivors", allVersions(t, db, testShard), tc.want)
			// Collect is idempotent.
			if _, removed := collect(t, db, testShard, tc.cutoff, 0, nil, 1000); removed != 0 {
				t.Errorf("second Collect removed %d", removed)
			}
			checkRecords(t, "survivors after second pass", allVersions(t, db, testShard), tc.want)
		})
	}
}

func randomHistory(r *rand.Rand, nKeys int) []Record {
	var recs []Record
	for k := 0; k < nKeys; k++ {
		key := []byte(fmt.Sprintf("k%03d", k))
		if k%7 == 0 {
			key = append(key, 0x00) // a key with a NUL next to its prefix key
		}
		n := 1 + r.IntN(5)
		for i := 0; i < n; i++ {
			rc := Record{Key: key, Version: ver(uint64(r.IntN(40)), trickySites[r.IntN(3)])}
			if r.IntN(3) == 0 {
				rc.Tombstone = true // tombstones carry no value
			} else {
				rc.Value = []byte(fmt.Sprint(i))
			}
			recs = append(recs, rc)
		}
	}
	return recs
}

// latestPut resolves duplicate versions the way storage does: the last Put
// of a version wins.
func latestPut(recs []Record) []Record {
	out := slices.Clone(recs)
	slices.Reverse(out)
	seen := map[string]bool{}
	var dedup []Record
	for _, r := range out {
		id := fmt.Sprintf("%q/%d/%s", r.Key, r.Version.HLC, r.Version.Site)
		if !seen[id] {
			seen[id] = true
			dedup = append(dedup, r)
		}
	}
	return dedup
}

// Collect agrees with the model on random histories, in one pass and in
// pages of every size.
func TestCollectModel(t *testing.T) {
	for seed := uint64(0); seed < 6; seed++ {
		r := rand.New(rand.NewPCG(seed, 99))
		recs := latestPut(randomHistory(r, 40))
		cutoff := uint64(r.IntN(40))
		want := expectSurvivors(recs, cutoff)
		wantRemoved := len(recs) - len(want)
		for _, maxKeys := range []int{1000, 1, 3, 40, 41} {
			t.Run(fmt.Sprintf("seed=%d/maxKeys=%d", seed, maxKeys), func(t *testing.T) {
				db := newDB(t)
				putRecords(t, db, testShard, recs...)
				var start []byte
				total, calls := 0, 0
				for {
					next, removed := collect(t, db, testShard, cutoff, 0, start, maxKeys)
					total += removed
					calls++
					if next == nil {
						break
					}
					if start != nil && bytes.Compare(next, start) <= 0 {
						t.Fatalf("next %q does not advance past %q", next, start)
					}
					start = next
					if calls > 1000 {
						t.Fatal("pagination does not terminate")
					}
				}
				if total != wantRemoved {
					t.Errorf("removed %d in %d calls, want %d", total, calls, wantRemoved)
				}
				if wantCalls := (40 + maxKeys - 1) / maxKeys; calls != wantCalls {
					t.Errorf("%d calls with maxKeys %d over 40 keys, want %d", calls, maxKeys, wantCalls)
				}
				checkRecords(t, "survivors", allVersions(t, db, testShard), want)
			})
		}
	}
}

func TestCollectPagination(t *testing.T) {
	db := newDB(t)
	var recs []Record
	for i := 0; i < 10; i++ {
		k := fmt.Sprintf("k%d", i)
		recs = append(recs, rec(k, 1, "a", "old"), rec(k, 2, "a", "new"))
	}
	putRecords(t, db, testShard, recs...)
	wantNext := []string{"k3", "k6", "k9", ""}
	var start []byte
	for i, want := range wantNext {
		next, removed := collect(t, db, testShard, 5, 0, start, 3)
		if string(next) != want || (want == "") != (next == nil) {
			t.Fatalf("call %d: next = %q, want %q", i, next, want)
		}
		wantRemoved := 3
		if i == 3 {
			wantRemoved = 1
		}
		if removed != wantRemoved {
			t.Fatalf("call %d: removed %d, want %d", i, removed, wantRemoved)
		}
		start = next
	}
	if n := len(allVersions(t, db, testShard)); n != 10 {
		t.Fatalf("%d versions left, want 10", n)
	}
}

// A key removed entirely still counts as visited, so pagination moves on.
func TestCollectPaginationAcrossDeletedKeys(t *testing.T) {
	db := newDB(t)
	putRecords(t, db, testShard,
		tomb("a", 1, "a"), rec("a", 0, "a", "x"),
		tomb("b", 1, "a"),
		rec("c", 1, "a", "c"),
		tomb("d", 1, "a"),
	)
	next, removed := collect(t, db, testShard, 10, 0, nil, 2)
	if string(next) != "c" || removed != 3 {
		t.Fatalf("first page: next %q removed %d, want c 3", next, removed)
	}
	next, removed = collect(t, db, testShard, 10, 0, next, 2)
	if next != nil || removed != 1 {
		t.Fatalf("second page: next %q removed %d, want nil 1", next, removed)
	}
	checkRecords(t, "survivors", allVersions(t, db, testShard), []Record{rec("c", 1, "a", "c")})
}

func TestCollectRequests(t *testing.T) {
	db := newDB(t)
	type req struct {
		client string
		seq    uint64
		hlc    uint64
	}
	reqs := []req{{"a", 1, 5}, {"a", 2, 10}, {"a", 3, 11}, {"b", 1, 0}, {"b", 2, 20}, {"c", 9, 10}, {"c", 10, 9}}
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		for _, r := range reqs {
			if err := s.PutRequest(r.client, r.seq, r.hlc, []byte(fmt.Sprint(r.hlc))); err != nil {
				return err
			}
		}
		return s.Put(rec("k", 1, "a", "v"))
	})
	if err != nil {
		t.Fatal(err)
	}
	present := func() map[req]bool {
		m := map[req]bool{}
		view(t, db, testShard, func(s *ShardTx) {
			for _, r := range reqs {
				out, ok, _ := s.Request(r.client, r.seq)
				if ok && string(out) != fmt.Sprint(r.hlc) {
					t.Fatalf("request %v outcome %q", r, out)
				}
				m[r] = ok
			}
		})
		return m
	}

	// A page that does not start at the beginning leaves requests alone.
	collect(t, db, testShard, 0, 100, []byte("k"), 10)
	for r, ok := range present() {
		if !ok {
			t.Fatalf("Collect with start != nil removed request %v", r)
		}
	}
	// Empty but non-nil start is not the beginning of a pass either.
	collect(t, db, testShard, 0, 100, []byte{}, 10)
	for r, ok := range present() {
		if !ok {
			t.Fatalf("Collect with empty start removed request %v", r)
		}
	}

	// A full pass removes exactly those at or below reqCutoff.
	_, removed := collect(t, db, testShard, 0, 10, nil, 10)
	if removed != 0 {
		t.Errorf("removed %d versions, want 0 (requests are not versions)", removed)
	}
	for r, ok := range present() {
		if want := r.hlc > 10; ok != want {
			t.Errorf("request %v present = %v, want %v", r, ok, want)
		}
	}
	// Even with maxKeys 1 the request sweep covers every request.
	collect(t, db, testShard, 0, 1000, nil, 1)
	for r, ok := range present() {
		if ok {
			t.Errorf("request %v survived reqCutoff 1000", r)
		}
	}
	// The data was not touched.
	checkRecords(t, "data", allVersions(t, db, testShard), []Record{rec("k", 1, "a", "v")})
}

func TestCollectEmptyShard(t *testing.T) {
	db := newDB(t)
	next, removed := collect(t, db, testShard, 100, 100, nil, 10)
	if next != nil || removed != 0 {
		t.Fatalf("Collect on empty shard = %q, %d", next, removed)
	}
}

// hasGarbage runs HasGarbage in a read-only transaction.
func hasGarbage(t *testing.T, db *DB, cutoff, reqCutoff uint64) bool {
	t.Helper()
	var found bool
	view(t, db, testShard, func(s *ShardTx) {
		var err error
		if found, err = s.HasGarbage(cutoff, reqCutoff); err != nil {
			t.Fatal(err)
		}
	})
	return found
}

// TestHasGarbageModel: HasGarbage says there is garbage exactly when a
// full Collect pass then removes something, over random histories with
// request ids and every cutoff, and a shard never written has none.
func TestHasGarbageModel(t *testing.T) {
	if hasGarbage(t, newDB(t), 100, 100) {
		t.Fatal("a shard never written has garbage")
	}
	for seed := uint64(0); seed < 8; seed++ {
		r := rand.New(rand.NewPCG(seed, 7))
		recs := latestPut(randomHistory(r, 20))
		reqHLCs := []uint64{uint64(r.IntN(40)), uint64(r.IntN(40))}
		for cutoff := uint64(0); cutoff <= 40; cutoff += 4 {
			for _, reqCutoff := range []uint64{0, 10, 20, 40} {
				db := newDB(t)
				putRecords(t, db, testShard, recs...)
				err := db.Update(func(tx *Tx) error {
					s, err := tx.Shard(testShard)
					if err != nil {
						return err
					}
					for i, h := range reqHLCs {
						if err := s.PutRequest("c", uint64(i+1), h, nil); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				found := hasGarbage(t, db, cutoff, reqCutoff)
				_, removed := collect(t, db, testShard, cutoff, reqCutoff, nil, -1)
				for _, h := range reqHLCs {
					if h <= reqCutoff {
						removed++
					}
				}
				if found != (removed > 0) {
					t.Fatalf("seed %d cutoff %d request cutoff %d: HasGarbage %v, a pass removed %d", seed, cutoff, reqCutoff, found, removed)
				}
				if found && hasGarbage(t, db, cutoff, reqCutoff) {
					t.Fatalf("seed %d cutoff %d request cutoff %d: garbage left after a full pass", seed, cutoff, reqCutoff)
				}
			}
		}
	}
}
