package wal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// TestMatchesInmemStore drives the WAL and hashicorp/raft's in-memory
// store with the same random sequence of the operations raft performs
// (appends, conflicting-suffix deletes followed by appends, compaction of
// a prefix, dropping a group) on several groups, with small segments so
// that segments roll, are removed and have their live entries relocated,
// reopening now and then. Both must always agree.
func TestMatchesInmemStore(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			cfg := testConfig(t.TempDir())
			cfg.SegmentBytes = 8 << 10
			cfg.MaxSegments = 3
			w := open(t, cfg)
			groups := []string{"a", "b", "c", "idle"}
			ref := map[string]*raft.InmemStore{}
			for _, g := range groups {
				ref[g] = raft.NewInmemStore()
			}
			term := uint64(1)
			relocated := 0.0
			for step := 0; step < 1000; step++ {
				g := groups[rng.IntN(len(groups))]
				if g == "idle" && step > 20 {
					g = groups[rng.IntN(3)]
				}
				r := ref[g]
				first, _ := r.FirstIndex()
				last, _ := r.LastIndex()
				var do func(s raft.LogStore) error
				switch op := rng.IntN(100); {
				case op < 70: // append
					n := 1 + rng.IntN(8)
					logs := make([]*raft.Log, n)
					for k := range logs {
						logs[k] = &raft.Log{Index: last + 1 + uint64(k), Term: term, Type: raft.LogCommand,
							Data: bytes.Repeat([]byte{byte(step)}, rng.IntN(300))}
						if rng.IntN(4) == 0 {
							logs[k].Extensions = []byte{byte(k)}
						}
					}
					do = func(s raft.LogStore) error { return s.StoreLogs(logs) }
				case op < 80 && last > first: // conflict: replace a suffix
					from := first + 1 + uint64(rng.IntN(int(last-first)))
					term++
					logs := []*raft.Log{{Index: from, Term: term, Type: raft.LogNoop}}
					do = func(s raft.LogStore) error {
						if err := s.DeleteRange(from, last); err != nil {
							return err
						}
						return s.StoreLogs(logs)
					}
				case op < 95 && last > first: // compaction
					upto := first + uint64(rng.IntN(int(last-first)))
					do = func(s raft.LogStore) error { return s.DeleteRange(first, upto) }
				case op < 97 && last > 0: // drop
					do = func(s raft.LogStore) error { return s.DeleteRange(first, last) }
				case op < 97:
					continue
				default:
					relocated += testutil.ToFloat64(w.m.relocatedBytes)
					if err := w.Close(); err != nil {
						t.Fatal(err)
					}
					w = open(t, cfg)
					do = func(raft.LogStore) error { return nil }
				}
				if err := do(r); err != nil {
					t.Fatal(err)
				}
				if err := do(w.Log(g)); err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				for _, g := range groups {
					compare(t, step, ref[g], w.Log(g))
				}
			}
			if relocated += testutil.ToFloat64(w.m.relocatedBytes); relocated == 0 {
				t.Fatal("no entries were relocated")
			}
			if n := len(segments(t, cfg.Dir)); n > cfg.MaxSegments+2 {
				t.Fatalf("%d segments at the end", n)
			}
		})
	}
}

func compare(t *testing.T, step int, want *raft.InmemStore, got *Log) {
	t.Helper()
	wf, _ := want.FirstIndex()
	wl, _ := want.LastIndex()
	if wf > wl { // the in-memory store keeps stale bounds once emptied
		wf, wl = 0, 0
	}
	checkRangeAt := func() {
		gf, _ := got.FirstIndex()
		gl, _ := got.LastIndex()
		if gf != wf || gl != wl {
			t.Fatalf("step %d, %s: [First, Last] = [%d, %d]; want [%d, %d]", step, got.group, gf, gl, wf, wl)
		}
	}
	checkRangeAt()
	for i := wf; i <= wl && wl != 0; i++ {
		var a, b raft.Log
		errA := want.GetLog(i, &a)
		errB := got.GetLog(i, &b)
		if errA != nil {
			if !errors.Is(errB, raft.ErrLogNotFound) {
				t.Fatalf("step %d, %s: GetLog(%d) = %v; want not found", step, got.group, i, errB)
			}
			continue
		}
		if errB != nil || !equalLog(&a, &b) {
			t.Fatalf("step %d, %s: GetLog(%d) = %+v, %v; want %+v", step, got.group, i, b, errB, a)
		}
	}
}
