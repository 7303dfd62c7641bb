package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/wal"
)

func openWAL(t testing.TB, dir string, noSync bool) *wal.WAL {
	t.Helper()
	cfg := wal.DefaultConfig(dir)
	cfg.NoSync = noSync
	w, err := wal.Open(cfg, discardLogger(), nil)
	if err != nil {
		t.Fatalf("wal.Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func openRaftLogs(t testing.TB, db *DB, w *wal.WAL) *RaftLogs {
	t.Helper()
	r, err := OpenRaftLogs(db, w, discardLogger())
	if err != nil {
		t.Fatalf("OpenRaftLogs: %v", err)
	}
	return r
}

func checkLogs(t *testing.T, s raft.LogStore, want []*raft.Log) {
	t.Helper()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	if first != want[0].Index || last != want[len(want)-1].Index {
		t.Fatalf("[First, Last] = [%d, %d]; want [%d, %d]", first, last, want[0].Index, want[len(want)-1].Index)
	}
	for _, w := range want {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatalf("GetLog(%d): %v", w.Index, err)
		}
		if got.Term != w.Term || got.Type != w.Type || string(got.Data) != string(w.Data) ||
			string(got.Extensions) != string(w.Extensions) || !got.AppendedAt.Equal(w.AppendedAt) {
			t.Fatalf("GetLog(%d) = %+v; want %+v", w.Index, got, w)
		}
	}
}

// TestRaftLogsMigration: a data directory of the previous version has its
// raft logs in raft.db; opening moves them into the write-ahead log and
// keeps the stable stores where they are.
func TestRaftLogsMigration(t *testing.T) {
	cfg := testConfig(t)
	db := openDB(t, cfg)
	old := map[string][]*raft.Log{
		"ks/0":    makeLogs(1, 1500, 2), // more than one copy chunk
		"ks/1":    makeLogs(40, 45, 1),
		"catalog": makeLogs(1, 3, 1),
	}
	old["ks/1"][2].Extensions = []byte("ext")
	for g, logs := range old {
		s := db.RaftStore(g)
		if err := s.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
		if err := s.SetUint64([]byte("CurrentTerm"), 9); err != nil {
			t.Fatal(err)
		}
	}
	walDir := filepath.Join(t.TempDir(), "wal")
	w := openWAL(t, walDir, true)
	// A move interrupted by a crash left part of a group in the WAL.
	if err := w.Log("ks/0").StoreLogs(makeLogs(1, 10, 2)); err != nil {
		t.Fatal(err)
	}
	r := openRaftLogs(t, db, w)
	check := func(r *RaftLogs) {
		for g, logs := range old {
			s := r.RaftStore(g)
			checkLogs(t, s, logs)
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 9 {
				t.Fatalf("%s: CurrentTerm = %d, %v", g, v, err)
			}
			// raft.db no longer holds the entries.
			checkIndexes(t, db.RaftStore(g), 0, 0)
		}
	}
	check(r)
	// Reopening moves nothing and keeps everything.
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = openWAL(t, walDir, true)
	check(openRaftLogs(t, db, w))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	// Once moved, a missing write-ahead log is refused, not recreated empty.
	if err := os.RemoveAll(walDir); err != nil {
		t.Fatal(err)
	}
	w = openWAL(t, walDir, true)
	if _, err := OpenRaftLogs(db, w, discardLogger()); !errors.Is(err, ErrMissingLog) {
		t.Fatalf("OpenRaftLogs without the WAL: %v", err)
	}
}

func TestRaftLogsStoreAndDrop(t *testing.T) {
	db := newDB(t)
	w := openWAL(t, t.TempDir(), true)
	r := openRaftLogs(t, db, w)
	for _, g := range []string{"a", "b"} {
		s := r.RaftStore(g)
		if err := s.StoreLogs(makeLogs(1, 5, 1)); err != nil {
			t.Fatal(err)
		}
		if err := s.Set([]byte("LastVoteCand"), []byte("n2")); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Drop("a"); err != nil {
		t.Fatal(err)
	}
	a := r.RaftStore("a")
	if last, _ := a.LastIndex(); last != 0 {
		t.Fatalf("LastIndex after Drop = %d", last)
	}
	if _, err := a.Get([]byte("LastVoteCand")); err == nil {
		t.Fatal("stable store survived Drop")
	}
	b := r.RaftStore("b")
	checkLogs(t, b, makeLogs(1, 5, 1))
	if v, err := b.Get([]byte("LastVoteCand")); err != nil || string(v) != "n2" {
		t.Fatalf("b's vote: %q, %v", v, err)
	}
}

// BenchmarkRaftLogAppend compares raft log appends of one 256-byte entry
// in the write-ahead log and in raft.db (bbolt), with 1 and 16 groups
// appending concurrently, with fsync on. "fdatasync" is the floor: one
// 512-byte write at increasing offsets of a zero-filled file and one
// fdatasync per operation, in the same directory.
func BenchmarkRaftLogAppend(b *testing.B) {
	b.Run("fdatasync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "f"))
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		// Zero-filled first, so that only data is flushed.
		if _, err := f.Write(make([]byte, 64<<20)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		buf := make([]byte, 512)
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := f.WriteAt(buf, int64(i%(128<<10))*512); err != nil {
				b.Fatal(err)
			}
			if err := fdatasync(f); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("wal/writers=%d", writers), func(b *testing.B) {
			w := openWAL(b, filepath.Join(b.TempDir(), "wal"), false)
			stores := make([]raft.LogStore, writers)
			for i := range stores {
				stores[i] = w.Log(fmt.Sprintf("ks/%d", i))
			}
			benchAppend(b, stores)
		})
		b.Run(fmt.Sprintf("bbolt/writers=%d", writers), func(b *testing.B) {
			cfg := DefaultConfig(filepath.Join(b.TempDir(), "raft.db"), testID)
			cfg.Name = "raft"
			db := openDB(b, cfg)
			stores := make([]raft.LogStore, writers)
			for i := range stores {
				stores[i] = db.RaftStore(fmt.Sprintf("ks/%d", i))
			}
			benchAppend(b, stores)
		})
	}
}

// benchAppend appends b.N entries spread over stores, one goroutine per
// store, one entry per StoreLogs (as a lightly loaded raft group does).
func benchAppend(b *testing.B, stores []raft.LogStore) {
	data := make([]byte, 256)
	per := b.N/len(stores) + 1
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 1; i <= per; i++ {
				l := &raft.Log{Index: uint64(i), Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
				if err := s.StoreLogs([]*raft.Log{l}); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(time.Since(start).Nanoseconds())/float64(per*len(stores)), "ns/entry")
}
