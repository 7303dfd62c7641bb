package wal

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func testConfig(dir string) Config {
	cfg := DefaultConfig(dir)
	cfg.SegmentBytes = 64 << 10
	cfg.MaxSegments = 4
	return cfg
}

func open(t testing.TB, cfg Config) *WAL {
	t.Helper()
	w, err := Open(cfg, quiet(), prometheus.NewRegistry())
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

func entry(group string, i, term uint64) *raft.Log {
	return &raft.Log{
		Index:      i,
		Term:       term,
		Type:       raft.LogCommand,
		Data:       []byte(fmt.Sprintf("%s-data-%d-%d", group, i, term)),
		AppendedAt: time.Unix(1_700_000_000, int64(i)),
	}
}

func entries(group string, from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(group, i, term))
	}
	return out
}

func store(t testing.TB, l *Log, logs []*raft.Log) {
	t.Helper()
	if err := l.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs(%d..): %v", logs[0].Index, err)
	}
}

func checkRange(t testing.TB, l *Log, first, last uint64) {
	t.Helper()
	f, err1 := l.FirstIndex()
	z, err2 := l.LastIndex()
	if err1 != nil || err2 != nil || f != first || z != last {
		t.Fatalf("%s: [First, Last] = [%d, %d] (%v, %v); want [%d, %d]", l.group, f, z, err1, err2, first, last)
	}
}

func equalLog(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type && bytes.Equal(a.Data, b.Data) &&
		bytes.Equal(a.Extensions, b.Extensions) && a.AppendedAt.Equal(b.AppendedAt)
}

// checkEntries checks that l holds exactly entries first..last of term
// term as made by entry().
func checkEntries(t testing.TB, l *Log, first, last, term uint64) {
	t.Helper()
	checkRange(t, l, first, last)
	for i := first; i <= last && last != 0; i++ {
		var got raft.Log
		if err := l.GetLog(i, &got); err != nil {
			t.Fatalf("%s: GetLog(%d): %v", l.group, i, err)
		}
		if want := entry(l.group, i, term); !equalLog(&got, want) {
			t.Fatalf("%s: GetLog(%d) = %+v; want %+v", l.group, i, got, want)
		}
	}
	var got raft.Log
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		if err := l.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("%s: GetLog(%d) outside [%d, %d]: %v", l.group, i, first, last, err)
		}
	}
}

func TestRoundTripEveryField(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	logs := []*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: []byte{0, 1, 2}, Extensions: []byte("ext"), AppendedAt: time.Unix(1_700_000_000, 123456789)},
		{Index: 2, Term: 1, Type: raft.LogNoop},
		{Index: 3, Term: math.MaxUint64, Type: raft.LogBarrier, Data: bytes.Repeat([]byte{0xFF}, 10_000), AppendedAt: time.Unix(0, 1)},
		{Index: 4, Term: 7, Type: raft.LogCommand, Extensions: []byte{0}, AppendedAt: time.Unix(-5, 0)},
	}
	check := func(w *WAL) {
		l := w.Log("ks/0")
		checkRange(t, l, 1, 4)
		for _, want := range logs {
			var got raft.Log
			if err := l.GetLog(want.Index, &got); err != nil {
				t.Fatal(err)
			}
			if !equalLog(&got, want) || got.AppendedAt.UnixNano() != want.AppendedAt.UnixNano() {
				t.Fatalf("GetLog(%d) = %+v; want %+v", want.Index, got, want)
			}
		}
	}
	w := open(t, cfg)
	store(t, w.Log("ks/0"), logs)
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, cfg))
}

// TestLogStoreContract follows the behaviour of raft's in-memory store
// that hashicorp/raft relies on.
func TestLogStoreContract(t *testing.T) {
	w := open(t, testConfig(t.TempDir()))
	l := w.Log("g")
	checkRange(t, l, 0, 0)
	var out raft.Log
	if err := l.GetLog(1, &out); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on empty: %v", err)
	}
	if err := l.StoreLog(entry("g", 1, 1)); err != nil {
		t.Fatal(err)
	}
	store(t, l, entries("g", 2, 10, 1))
	checkEntries(t, l, 1, 10, 1)
	// Compaction after a snapshot.
	if err := l.DeleteRange(1, 4); err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 5, 10)
	// Conflict: raft deletes the suffix, then stores the leader's entries.
	if err := l.DeleteRange(8, 10); err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 5, 7)
	store(t, l, entries("g", 8, 12, 2))
	for i := uint64(5); i <= 12; i++ {
		term := uint64(1)
		if i >= 8 {
			term = 2
		}
		if err := l.GetLog(i, &out); err != nil || !equalLog(&out, entry("g", i, term)) {
			t.Fatalf("GetLog(%d) = %+v, %v", i, out, err)
		}
	}
	// Storing at or below the last index replaces everything from there.
	store(t, l, entries("g", 6, 6, 3))
	checkRange(t, l, 5, 6)
	if err := l.GetLog(6, &out); err != nil || out.Term != 3 {
		t.Fatalf("GetLog(6) after overwrite = %+v, %v", out, err)
	}
	// Deleting everything empties the log.
	if err := l.DeleteRange(0, math.MaxUint64); err != nil {
		t.Fatal(err)
	}
	checkRange(t, l, 0, 0)
	// Out-of-order batches are refused.
	if err := l.StoreLogs([]*raft.Log{entry("g", 3, 1), entry("g", 2, 1)}); !errors.Is(err, ErrOrder) {
		t.Fatalf("StoreLogs out of order: %v", err)
	}
	// A log may start anywhere, and may skip ahead (a follower that
	// installed a snapshot far ahead of its log).
	store(t, l, entries("g", 100, 102, 4))
	store(t, l, entries("g", 200, 201, 4))
	checkRange(t, l, 100, 201)
	if err := l.GetLog(150, &out); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog in a gap: %v", err)
	}
	if err := l.DeleteRange(100, 102); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, l, 200, 201, 4)
}

func TestManyGroupsInterleavedAndReopen(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	const groups = 20
	name := func(g int) string { return fmt.Sprintf("ks/%d", g) }
	for i := uint64(1); i <= 30; i++ {
		for g := 0; g < groups; g++ {
			store(t, w.Log(name(g)), []*raft.Log{entry(name(g), i, 1)})
		}
	}
	for g := 0; g < groups; g++ {
		l := w.Log(name(g))
		switch g % 3 {
		case 1:
			if err := l.DeleteRange(1, 10); err != nil {
				t.Fatal(err)
			}
		case 2:
			if err := l.DeleteRange(21, 30); err != nil {
				t.Fatal(err)
			}
		}
	}
	check := func(w *WAL) {
		for g := 0; g < groups; g++ {
			first, last := uint64(1), uint64(30)
			switch g % 3 {
			case 1:
				first = 11
			case 2:
				last = 20
			}
			checkEntries(t, w.Log(name(g)), first, last, 1)
		}
		if got := len(w.Groups()); got != groups {
			t.Fatalf("Groups() has %d groups", got)
		}
	}
	check(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	check(open(t, cfg))
}

func TestConcurrentGroupCommit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	reg := prometheus.NewRegistry()
	w, err := Open(cfg, quiet(), reg)
	if err != nil {
		t.Fatal(err)
	}
	const writers, perWriter = 16, 60
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for g := 0; g < writers; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("g%d", g)
			l := w.Log(name)
			for i := uint64(1); i <= perWriter; i++ {
				if err := l.StoreLogs(entries(name, i, i, 1)); err != nil {
					errs <- err
					return
				}
				// Readers run alongside the writers.
				var out raft.Log
				if err := l.GetLog(i, &out); err != nil || !equalLog(&out, entry(name, i, 1)) {
					errs <- fmt.Errorf("%s GetLog(%d) = %+v, %v", name, i, out, err)
					return
				}
				if i%20 == 0 {
					if err := l.DeleteRange(1, i-10); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == "causeway_wal_batch_entries" {
			h := mf.GetMetric()[0].GetHistogram()
			t.Logf("%d commits for %d entries", h.GetSampleCount(), int(h.GetSampleSum()))
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	for g := 0; g < writers; g++ {
		checkEntries(t, w.Log(fmt.Sprintf("g%d", g)), perWriter-10+1, perWriter, 1)
	}
}

func segments(t testing.TB, dir string) []string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*"+segmentSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	return names
}

// laidOut is one record of a segment file: its offset, length and
// decoded body.
type laidOut struct {
	off, n int
	rec    record
}

// layout returns the records of the segment file raw, in order, marks
// included; the records must end cleanly.
func layout(t testing.TB, raw []byte) []laidOut {
	t.Helper()
	var out []laidOut
	_, tail, err := scan(bytes.NewReader(raw[segHeaderLen:]), segHeaderLen, int64(len(raw)-segHeaderLen), func(off int64, n int, r record) {
		out = append(out, laidOut{off: int(off), n: n, rec: r})
	})
	if tail != nil || err != nil {
		t.Fatalf("reading the segment's layout: %v, %v", tail, err)
	}
	return out
}

// entryAt returns the record of group's entry index in lo.
func entryAt(t testing.TB, lo []laidOut, group string, index uint64) laidOut {
	t.Helper()
	for _, r := range lo {
		if r.rec.kind == kindEntry && r.rec.group == group && r.rec.index == index {
			return r
		}
	}
	t.Fatalf("no record of %s/%d in the segment", group, index)
	return laidOut{}
}

// marksOf returns the marks in lo: one per write.
func marksOf(lo []laidOut) []laidOut {
	var out []laidOut
	for _, r := range lo {
		if r.rec.kind == kindMark {
			out = append(out, r)
		}
	}
	return out
}

func TestSegmentRolloverAndRemoval(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxSegments = 1000 // no relocation: removal only
	w := open(t, cfg)
	l := w.Log("g")
	big := func(i uint64) *raft.Log {
		e := entry("g", i, 1)
		e.Data = bytes.Repeat([]byte{byte(i)}, 1000)
		return e
	}
	for i := uint64(1); i <= 500; i++ {
		store(t, l, []*raft.Log{big(i)})
	}
	if n := len(segments(t, cfg.Dir)); n < 7 {
		t.Fatalf("500 KB in 64 KiB segments used %d segments", n)
	}
	if err := l.DeleteRange(1, 490); err != nil {
		t.Fatal(err)
	}
	if n := len(segments(t, cfg.Dir)); n > 2 {
		t.Fatalf("%d segments left after deleting all but the last 10 entries", n)
	}
	var out raft.Log
	for i := uint64(491); i <= 500; i++ {
		if err := l.GetLog(i, &out); err != nil || !equalLog(&out, big(i)) {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkRange(t, w.Log("g"), 491, 500)
}

// TestIdleGroupDoesNotPinTheDisk: a group that stops writing keeps its
// entries, but not every segment written after them.
func TestIdleGroupDoesNotPinTheDisk(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	store(t, w.Log("idle"), entries("idle", 1, 3, 1))
	busy := w.Log("busy")
	most := 0
	for i := uint64(1); i <= 2000; i++ {
		e := entry("busy", i, 1)
		e.Data = bytes.Repeat([]byte{1}, 500)
		store(t, busy, []*raft.Log{e})
		if i%50 == 0 { // compaction after a snapshot, keeping 20 entries
			if err := busy.DeleteRange(0, i-20); err != nil {
				t.Fatal(err)
			}
		}
		most = max(most, len(segments(t, cfg.Dir)))
	}
	// 1 MB went through 64 KiB segments.
	if most > cfg.MaxSegments+2 {
		t.Fatalf("up to %d segments with MaxSegments %d", most, cfg.MaxSegments)
	}
	checkEntries(t, w.Log("idle"), 1, 3, 1)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkEntries(t, w.Log("idle"), 1, 3, 1)
	checkRange(t, w.Log("busy"), 1981, 2000)
}

func TestDrop(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	store(t, w.Log("a"), entries("a", 1, 10, 1))
	store(t, w.Log("b"), entries("b", 1, 10, 1))
	if err := w.Drop("a"); err != nil {
		t.Fatal(err)
	}
	checkRange(t, w.Log("a"), 0, 0)
	if got := w.Groups(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("Groups() = %v", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkRange(t, w.Log("a"), 0, 0)
	checkEntries(t, w.Log("b"), 1, 10, 1)
	// A dropped group can come back.
	store(t, w.Log("a"), entries("a", 5, 6, 2))
	checkEntries(t, w.Log("a"), 5, 6, 2)
}

func copyDir(t testing.TB, src, dst string) {
	t.Helper()
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTruncatedSegmentIsRefused: a segment cut short at a record boundary
// (a truncated copy, a lost file tail) reads as a well-formed log that
// ends early, but the records cut off were synced, so acknowledged. Open
// refuses it, naming the file and its length (guard wal-length), and a
// reopen with the file untouched still works.
func TestTruncatedSegmentIsRefused(t *testing.T) {
	src := t.TempDir()
	w := open(t, testConfig(src))
	store(t, w.Log("g"), entries("g", 1, 5, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, src)
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	end := len(raw)
	for end > 0 && raw[end-1] == 0 {
		end--
	}
	w = open(t, testConfig(src))
	store(t, w.Log("g"), entries("g", 6, 8, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	copyDir(t, src, dir)
	if err := os.Truncate(filepath.Join(dir, filepath.Base(segs[0])), int64(end)); err != nil {
		t.Fatal(err)
	}
	w2, err := Open(testConfig(dir), quiet(), nil)
	if err == nil {
		defer w2.Close()
		last, _ := w2.Log("g").LastIndex()
		t.Fatalf("a segment cut to %d bytes opened, the log of g ending at %d of 8", end, last)
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "was truncated") {
		t.Fatalf("open of a truncated segment: %v; want ErrCorrupt saying it was truncated", err)
	}
	t.Logf("refused: %v", err)
	w3 := open(t, testConfig(src))
	checkRange(t, w3.Log("g"), 1, 8)
	_ = w3.Close()
}

// TestTornTail cuts the log at every byte of its last write (its mark and
// its record), as a crash in the middle of a write would, and checks that
// every earlier record survives and the log accepts new writes.
func TestTornTail(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	w := open(t, cfg)
	store(t, w.Log("g"), entries("g", 1, 5, 1))
	store(t, w.Log("h"), entries("h", 1, 1, 1))
	store(t, w.Log("g"), entries("g", 6, 6, 1)) // the last record
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, src)
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The last write: its mark, then the record of g/6.
	lo := layout(t, raw)
	marks := marksOf(lo)
	last := entryAt(t, lo, "g", 6)
	if len(marks) != 3 || lo[len(lo)-1] != last || lo[len(lo)-2] != marks[2] {
		t.Fatalf("unexpected segment layout: %+v", lo)
	}
	recStart, recEnd := marks[2].off, last.off+last.n
	for cut := recStart; cut < recEnd; cut++ {
		for _, mode := range []string{"partial", "zero"} {
			if isZero(raw[cut:recEnd]) {
				continue // nothing lost
			}
			dir := t.TempDir()
			copyDir(t, src, dir)
			seg := filepath.Join(dir, filepath.Base(segs[0]))
			switch mode {
			case "partial": // the write stopped at cut (the file keeps its preallocated length)
				b := slices.Clone(raw)
				clear(b[cut:recEnd])
				if err := os.WriteFile(seg, b, 0o600); err != nil {
					t.Fatal(err)
				}
			case "zero": // the tail's pages never reached the disk
				b := slices.Clone(raw)
				clear(b[cut:])
				if err := os.WriteFile(seg, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			w, err := Open(testConfig(dir), quiet(), nil)
			if err != nil {
				t.Fatalf("cut at %d (%s): %v", cut, mode, err)
			}
			checkEntries(t, w.Log("g"), 1, 5, 1)
			checkEntries(t, w.Log("h"), 1, 1, 1)
			store(t, w.Log("g"), entries("g", 6, 7, 2))
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			w, err = Open(testConfig(dir), quiet(), nil)
			if err != nil {
				t.Fatalf("reopen after cut at %d (%s): %v", cut, mode, err)
			}
			checkRange(t, w.Log("g"), 1, 7)
			_ = w.Close()
		}
	}
	// A flipped byte in the last record is also an interrupted write.
	dir := t.TempDir()
	copyDir(t, src, dir)
	b := slices.Clone(raw)
	b[last.off+headerLen+3] ^= 0x40
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(segs[0])), b, 0o600); err != nil {
		t.Fatal(err)
	}
	w2 := open(t, testConfig(dir))
	checkEntries(t, w2.Log("g"), 1, 5, 1)
}

func TestCorruptionBeforeTheTailIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	l := w.Log("g")
	for i := uint64(1); i <= 200; i++ {
		e := entry("g", i, 1)
		e.Data = bytes.Repeat([]byte{7}, 1000)
		store(t, l, []*raft.Log{e})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, cfg.Dir)
	if len(segs) < 3 {
		t.Fatalf("segments: %v", segs)
	}
	f, err := os.OpenFile(segs[0], os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xEE}, segHeaderLen+headerLen+500); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	_, err = Open(cfg, quiet(), nil)
	if !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a damaged first segment: %v", err)
	}
	t.Logf("error: %v", err)
	// A foreign file is refused too.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testConfig(dir), quiet(), nil); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open with a foreign file: %v", err)
	}
}

func TestClosed(t *testing.T) {
	w := open(t, testConfig(t.TempDir()))
	l := w.Log("g")
	store(t, l, entries("g", 1, 1, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := l.StoreLogs(entries("g", 2, 2, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLogs after Close: %v", err)
	}
	var out raft.Log
	if err := l.GetLog(1, &out); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLog after Close: %v", err)
	}
}

// TestWithRaftLogCache runs the WAL under raft's own LogCache, the way
// shard groups use it.
func TestWithRaftLogCache(t *testing.T) {
	w := open(t, testConfig(t.TempDir()))
	c, err := raft.NewLogCache(16, w.Log("g"))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StoreLogs(entries("g", 1, 40, 1)); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteRange(1, 30); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, w.Log("g"), 31, 40, 1)
}

// TestNothingStaleFollowsNewRecords: an interrupted write can lose some
// of its sectors and keep later ones, leaving a hole followed by intact
// records of the same write. Recovery stops at the hole; the records
// appended next must not make the ones after it reappear.
func TestNothingStaleFollowsNewRecords(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	big := func(i, term uint64) *raft.Log {
		e := entry("g", i, term)
		e.Data = bytes.Repeat([]byte{byte(i)}, 2000)
		return e
	}
	store(t, w.Log("g"), []*raft.Log{big(1, 1)})
	store(t, w.Log("g"), []*raft.Log{big(2, 1), big(3, 1)}) // one write
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, cfg.Dir)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	r2, r3 := entryAt(t, lo, "g", 2), entryAt(t, lo, "g", 3)
	clear(raw[r2.off : r2.off+r2.n]) // record 2's sectors never reached the disk
	if err := os.WriteFile(seg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkRange(t, w.Log("g"), 1, 1)
	// Open marked where it cut the log (an empty write, number 3); the
	// next write (4) is sized to end where record 3 began.
	from := r2.off + len(appendMark(nil, 3, 0))
	e := big(2, 2)
	e.Data = e.Data[:len(e.Data)-(from+len(appendMark(nil, 4, uint64(r2.n)))-r2.off)]
	if n := len(appendEntry(nil, "g", e)); from+len(appendMark(nil, 4, uint64(n)))+n != r3.off {
		t.Fatalf("the new record does not end where record 3 began")
	}
	store(t, w.Log("g"), []*raft.Log{e})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkRange(t, w.Log("g"), 1, 2)
}

// TestRestartsDoNotAddSegments: appends continue in the last segment.
func TestRestartsDoNotAddSegments(t *testing.T) {
	cfg := testConfig(t.TempDir())
	for i := uint64(1); i <= 20; i++ {
		w := open(t, cfg)
		store(t, w.Log("g"), entries("g", i, i, 1))
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(segments(t, cfg.Dir)); n != 1 {
		t.Fatalf("%d segments after 20 restarts", n)
	}
	checkEntries(t, open(t, cfg).Log("g"), 1, 20, 1)
}

// TestConcurrentRollsRemovalsAndReads: writers, compactions and readers
// of many groups run while segments roll, are removed and have their live
// entries relocated.
func TestConcurrentRollsRemovalsAndReads(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	const writers, perWriter = 4, 200
	payload := func(g int, i uint64) []byte { return bytes.Repeat([]byte{byte(g), byte(i)}, 500) }
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	for g := 0; g < writers; g++ {
		l := w.Log(fmt.Sprint("g", g))
		wg.Add(2)
		done := make(chan struct{})
		go func() { // writer and compactor
			defer wg.Done()
			defer close(done)
			for i := uint64(1); i <= perWriter; i++ {
				if err := l.StoreLogs([]*raft.Log{{Index: i, Term: 1, Data: payload(g, i)}}); err != nil {
					errs <- err
					return
				}
				if i%20 == 0 {
					if err := l.DeleteRange(0, i-10); err != nil {
						errs <- err
						return
					}
				}
			}
		}()
		go func() { // reader
			defer wg.Done()
			for {
				select {
				case <-done:
					return
				default:
				}
				runtime.Gosched()
				first, _ := l.FirstIndex()
				last, _ := l.LastIndex()
				if last == 0 {
					continue
				}
				var out raft.Log
				err := l.GetLog(last, &out)
				if errors.Is(err, raft.ErrLogNotFound) {
					continue // compacted or replaced meanwhile
				}
				if err != nil || !bytes.Equal(out.Data, payload(g, last)) {
					errs <- fmt.Errorf("g%d GetLog(%d) in [%d, %d]: %v", g, last, first, last, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if n := len(segments(t, cfg.Dir)); n > cfg.MaxSegments+2 {
		t.Fatalf("%d segments", n)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	for g := 0; g < writers; g++ {
		l := w.Log(fmt.Sprint("g", g))
		checkRange(t, l, perWriter-9, perWriter)
		for i := uint64(perWriter - 9); i <= perWriter; i++ {
			var out raft.Log
			if err := l.GetLog(i, &out); err != nil || !bytes.Equal(out.Data, payload(g, i)) {
				t.Fatalf("g%d GetLog(%d) after reopen: %v", g, i, err)
			}
		}
	}
}

// TestRecordLargerThanASegment: a batch larger than a segment gets a
// segment of its own, which survives reopening.
func TestRecordLargerThanASegment(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	big := entry("g", 2, 1)
	big.Data = bytes.Repeat([]byte("x"), int(3*cfg.SegmentBytes))
	store(t, w.Log("g"), entries("g", 1, 1, 1))
	store(t, w.Log("g"), []*raft.Log{big})
	check := func(w *WAL) {
		t.Helper()
		var out raft.Log
		if err := w.Log("g").GetLog(2, &out); err != nil || !equalLog(&out, big) {
			t.Fatalf("GetLog(2): %v", err)
		}
	}
	check(w)
	for i := 0; i < 2; i++ {
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		w = open(t, cfg)
		check(w)
	}
	store(t, w.Log("g"), entries("g", 3, 3, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	check(w)
	checkRange(t, w.Log("g"), 1, 3)
}

// TestGap: Gap reports the first range above a given index that a group's
// log lacks (as a deleted segment leaves it), and nothing when the log is
// whole above it.
func TestGap(t *testing.T) {
	w := open(t, testConfig(t.TempDir()))
	l := w.Log("g")
	store(t, l, entries("g", 1, 10, 1))
	if _, _, ok := l.Gap(0); ok {
		t.Fatal("a whole log has a gap")
	}
	if err := l.DeleteRange(4, 6); err != nil {
		t.Fatal(err)
	}
	if first, last, ok := l.Gap(0); !ok || first != 4 || last != 6 {
		t.Fatalf("Gap(0) = %d, %d, %v; want 4, 6, true", first, last, ok)
	}
	if first, last, ok := l.Gap(4); !ok || first != 5 || last != 6 {
		t.Fatalf("Gap(4) = %d, %d, %v; want 5, 6, true", first, last, ok)
	}
	if _, _, ok := l.Gap(6); ok {
		t.Fatal("Gap(6): the log is whole above 6")
	}
	if _, _, ok := w.Log("none").Gap(0); ok {
		t.Fatal("an empty log has a gap")
	}
}

// TestLongLogsAreNotCopiedOnEveryCommit: a group whose log is longer
// than MaxSegments segments (large entries between two snapshots) fills
// every segment with live entries. Relocating the oldest then copied a
// whole segment into the new head, which the next commit found full:
// every group commit rolled and copied a segment (64 MiB per write in
// production), far more than it wrote. Segments mostly live stay where
// they are until the log is compacted; copying stays below the data
// written.
func TestLongLogsAreNotCopiedOnEveryCommit(t *testing.T) {
	cfg := testConfig(t.TempDir())
	w := open(t, cfg)
	l := w.Log("long")
	const n = 1000
	payload := func(i uint64) []byte { return bytes.Repeat([]byte{byte(i), byte(i >> 8)}, 512) }
	written := 0
	for i := uint64(1); i <= n; i++ {
		e := entry("long", i, 1)
		e.Data = payload(i)
		store(t, l, []*raft.Log{e})
		written += len(e.Data)
	}
	if got := testutil.ToFloat64(w.m.relocatedBytes); got > float64(written) {
		t.Errorf("%.0f bytes relocated while writing %d: live segments were copied again and again", got, written)
	}
	var out raft.Log
	for i := uint64(1); i <= n; i++ {
		if err := l.GetLog(i, &out); err != nil || !bytes.Equal(out.Data, payload(i)) {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
	}
	// A compaction frees the segments.
	if err := l.DeleteRange(1, n-10); err != nil {
		t.Fatal(err)
	}
	if got := len(segments(t, cfg.Dir)); got > 2 {
		t.Errorf("%d segments after the compaction, want at most 2", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	checkRange(t, open(t, cfg).Log("long"), n-9, n)
}
