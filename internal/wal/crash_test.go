package wal

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
)

// groupModel is what a group's log must hold: entries [first, last] of
// their recorded terms, acknowledged, plus at most one operation that was
// in flight when a crash image was taken.
type groupModel struct {
	first, last uint64
	terms       map[uint64]uint64
	// The operation in flight: appends up to appendTo (of term
	// appendTerm), or a prefix deletion up to deleteTo.
	appendTo, appendTerm, deleteTo uint64
}

func (m *groupModel) clone() groupModel {
	c := *m
	c.terms = make(map[uint64]uint64, len(m.terms))
	for k, v := range m.terms {
		c.terms[k] = v
	}
	return c
}

// check verifies a group's log in a crash image against the model.
func (m groupModel) check(l *Log) error {
	first, _ := l.FirstIndex()
	last, _ := l.LastIndex()
	if m.last == 0 && m.appendTo == 0 {
		if last != 0 {
			return fmt.Errorf("holds [%d, %d] though nothing was acknowledged", first, last)
		}
		return nil
	}
	mustFirst := m.first
	if m.deleteTo >= mustFirst {
		mustFirst = m.deleteTo + 1
	}
	if last < m.last || (m.appendTo == 0 && last > m.last) || (m.appendTo > 0 && last != m.last && last != m.appendTo) {
		return fmt.Errorf("last index %d; acknowledged %d, in flight %d", last, m.last, m.appendTo)
	}
	if first < m.first && m.first <= m.last {
		return fmt.Errorf("first index %d: entries from %d were deleted (acknowledged)", first, m.first)
	}
	if first > mustFirst {
		return fmt.Errorf("first index %d: acknowledged entries from %d are gone", first, mustFirst)
	}
	for i := mustFirst; i <= last; i++ {
		var e raft.Log
		if err := l.GetLog(i, &e); err != nil {
			return fmt.Errorf("acknowledged entry %d: %v", i, err)
		}
		term := m.terms[i]
		if i > m.last {
			term = m.appendTerm
		}
		if want := entry(l.group, i, term); !equalLog(&e, want) {
			return fmt.Errorf("entry %d = %q, want %q", i, e.Data, want.Data)
		}
	}
	return nil
}

// TestCrashImagesKeepAcknowledgedEntries takes crash images of a WAL on a
// vfs.MemFS while groups append and compact concurrently (small segments:
// segments roll, are removed, and have their live entries relocated), and
// checks each image: every acknowledged entry is there, no acknowledged
// deletion is undone. Each image is then reopened and written to, and
// crashed again.
func TestCrashImagesKeepAcknowledgedEntries(t *testing.T) {
	const seed = 20250601
	rng := rand.New(rand.NewPCG(seed, 0))
	fs := vfs.NewMem()
	cfg := testConfig("/data/wal")
	cfg.SegmentBytes = 8 << 10
	cfg.MaxSegments = 3
	cfg.FS = fs
	groups := []string{"a", "b", "c"}
	model := map[string]*groupModel{}
	for _, g := range groups {
		model[g] = &groupModel{terms: map[uint64]uint64{}}
	}
	term := uint64(1)
	segs := map[uint32]bool{}
	for gen := 0; gen < 20; gen++ {
		w, err := Open(cfg, quiet(), prometheus.NewRegistry())
		if err != nil {
			t.Fatalf("seed %d, generation %d: Open on the crash image: %v", seed, gen, err)
		}
		for _, g := range groups {
			if err := model[g].check(w.Log(g)); err != nil {
				t.Fatalf("seed %d, generation %d, group %s: %v", seed, gen, g, err)
			}
		}
		for seq := range w.mu.segs {
			segs[seq] = true
		}
		// Settle the in-flight operations: the image decided them.
		for _, g := range groups {
			m := model[g]
			last, _ := w.Log(g).LastIndex()
			for i := m.last + 1; i <= last; i++ {
				m.terms[i] = m.appendTerm
			}
			m.first, _ = w.Log(g).FirstIndex()
			m.last, m.appendTo, m.deleteTo = last, 0, 0
		}
		term++

		var mu sync.RWMutex // writers record under R; the crash takes W
		crashed := false
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for k, g := range groups {
			wg.Add(1)
			grng := rand.New(rand.NewPCG(seed, uint64(gen*10+k)))
			go func(g string, m *groupModel) {
				defer wg.Done()
				l := w.Log(g)
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					if crashed {
						mu.Unlock()
						return
					}
					del := m.last > m.first+20 && grng.IntN(4) == 0
					from, to := m.last+1, m.last+1+uint64(grng.IntN(8))
					upTo := m.first + uint64(grng.IntN(int(m.last-m.first)/2+1))
					if del {
						m.deleteTo = upTo
					} else {
						m.appendTo, m.appendTerm = to, term
					}
					mu.Unlock()
					var err error
					if del {
						err = l.DeleteRange(m.first, upTo)
					} else {
						err = l.StoreLogs(entries(g, from, to, term))
					}
					if err != nil {
						return // closed under us
					}
					mu.Lock()
					if !crashed {
						if del {
							m.first, m.deleteTo = upTo+1, 0
						} else {
							for i := from; i <= to; i++ {
								m.terms[i] = term
							}
							if m.first == 0 {
								m.first = from
							}
							m.last, m.appendTo = to, 0
						}
					}
					mu.Unlock()
				}
			}(g, model[g])
		}
		// Crash after a random number of commits.
		target := w.Log("a")
		mu.RLock()
		until := model["a"].last + 20 + uint64(rng.IntN(200))
		mu.RUnlock()
		deadline := time.Now().Add(30 * time.Second)
		for {
			if last, _ := target.LastIndex(); last >= until {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("seed %d, generation %d: the writers stalled", seed, gen)
			}
			runtime.Gosched()
		}
		mu.Lock()
		img := fs.CrashClone()
		crashed = true
		snapshot := map[string]groupModel{}
		for _, g := range groups {
			snapshot[g] = model[g].clone()
		}
		mu.Unlock()
		close(stop)
		_ = w.Close()
		wg.Wait()
		for _, g := range groups {
			m := snapshot[g]
			*model[g] = m
		}
		fs = img
		cfg.FS = img
	}
	// The images covered segment rolls and removals.
	if len(segs) < 10 {
		t.Fatalf("only %d segments were ever used", len(segs))
	}
	t.Logf("%d segments", len(segs))
}

// TestNoSyncCrashImageLosesEverything: the crash model notices a WAL that
// does not sync: with NoSync, nothing written survives an image.
func TestNoSyncCrashImageLosesEverything(t *testing.T) {
	fs := vfs.NewMem()
	cfg := testConfig("/data/wal")
	cfg.FS, cfg.NoSync = fs, true
	w := open(t, cfg)
	store(t, w.Log("a"), entries("a", 1, 50, 1))
	cfg.FS, cfg.NoSync = fs.CrashClone(), false
	w2 := open(t, cfg)
	if !w2.Fresh() {
		t.Fatal("the image of an unsynced WAL still has segments")
	}
	checkRange(t, w2.Log("a"), 0, 0)
}

// TestFailedSyncStopsWrites: after an fdatasync fails, the WAL refuses
// every write (the file's state is unknown) until it is reopened; what was
// acknowledged before is intact after the reopen.
func TestFailedSyncStopsWrites(t *testing.T) {
	mem := vfs.NewMem()
	tog := errorfs.NewToggle(errorfs.Syncs)
	cfg := testConfig("/data/wal")
	cfg.FS = errorfs.Wrap(mem, tog)
	w := open(t, cfg)
	l := w.Log("a")
	store(t, l, entries("a", 1, 10, 1))
	select {
	case <-w.Failed():
		t.Fatal("Failed is closed before any failure")
	default:
	}
	tog.On()
	if err := l.StoreLogs(entries("a", 11, 12, 1)); !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("StoreLogs with a failing sync: %v", err)
	}
	<-w.Failed()
	if err := w.Err(); !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("Err after a failed sync: %v", err)
	}
	tog.Off()
	if err := l.StoreLogs(entries("a", 11, 12, 1)); !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, ErrFailed) {
		t.Fatalf("StoreLogs after a failed sync: %v (want the sticky failure)", err)
	}
	if err := l.DeleteRange(1, 5); !errors.Is(err, ErrFailed) {
		t.Fatalf("DeleteRange after a failed sync: %v (want the sticky failure)", err)
	}
	_ = w.Close()
	// The crash image holds the acknowledged entries; the failed ones were
	// never acknowledged and never synced.
	cfg.FS = mem.CrashClone()
	w2 := open(t, cfg)
	checkEntries(t, w2.Log("a"), 1, 10, 1)
}

// TestFailedSegmentCreation: a segment that cannot be created (nor
// preallocated: a full disk) fails the batch that needed it, and the WAL
// stops; a reopen continues from the acknowledged entries.
func TestFailedSegmentCreation(t *testing.T) {
	for _, c := range []struct {
		name string
		pred errorfs.Predicate
	}{
		{"create", func(op errorfs.Op) bool { return op.Kind == errorfs.OpCreate }},
		{"preallocate", func(op errorfs.Op) bool { return op.Kind == errorfs.OpTruncate }},
		{"directory sync", func(op errorfs.Op) bool { return op.Kind == errorfs.OpSync && op.Path == "/data/wal" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			tog := errorfs.NewToggle(c.pred)
			cfg := testConfig("/data/wal")
			cfg.SegmentBytes = 4096
			cfg.FS = errorfs.Wrap(mem, tog)
			w := open(t, cfg)
			l := w.Log("a")
			// Fill most of the first segment.
			var last uint64
			for w.segCount.Load() == 1 && w.diskBytes.Load() == cfg.SegmentBytes && last < 60 {
				last++
				store(t, l, entries("a", last, last, 1))
			}
			if w.segCount.Load() != 1 {
				t.Fatal("rolled too early")
			}
			tog.On()
			var err error
			for i := 0; i < 100 && err == nil; i++ {
				err = l.StoreLogs(entries("a", last+1, last+1, 1))
				if err == nil {
					last++
				}
			}
			if !errors.Is(err, errorfs.ErrInjected) || !errors.Is(err, ErrFailed) {
				t.Fatalf("writes while segments cannot be created: %v", err)
			}
			if err := l.StoreLogs(entries("a", last+1, last+1, 1)); !errors.Is(err, ErrFailed) {
				t.Fatalf("a write after the failure: %v (want the sticky failure)", err)
			}
			tog.Off()
			_ = w.Close()
			cfg.FS = mem.CrashClone()
			w2 := open(t, cfg)
			checkEntries(t, w2.Log("a"), 1, last, 1)
			store(t, w2.Log("a"), entries("a", last+1, last+50, 1))
			checkEntries(t, w2.Log("a"), 1, last+50, 1)
		})
	}
}
