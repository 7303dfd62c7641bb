package wal

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/causeway-db/causeway/internal/vfs"
	"github.com/causeway-db/causeway/internal/vfs/errorfs"
)

// sizedEntry is entry(group, i, 1) with n bytes of data.
func sizedEntry(group string, i uint64, n int) *raft.Log {
	e := entry(group, i, 1)
	e.Data = bytes.Repeat([]byte{byte(i)}, n)
	return e
}

// firstDamaged returns the index of the first entry whose record (at
// offs[index-1], of length lens[index-1]) overlaps [from, to).
func firstDamaged(offs, lens []int, from, to int) uint64 {
	for k := range offs {
		if offs[k]+lens[k] > from && offs[k] < to {
			return uint64(k + 1)
		}
	}
	return 0
}

// withoutMarks returns the segment file raw as releases before write
// marks wrote it: the same records, one after the other, without the
// marks, and zeros to the same length.
func withoutMarks(t testing.TB, raw []byte) []byte {
	t.Helper()
	out := slices.Clone(raw[:segHeaderLen])
	for _, r := range layout(t, raw) {
		if r.rec.kind != kindMark {
			out = append(out, raw[r.off:r.off+r.n]...)
		}
	}
	return append(out, make([]byte, len(raw)-len(out))...)
}

// TestZeroedSectorBeforeTheLastWriteIsRefused: after a crash (a machine
// restart: the page cache is gone), only the last write can have lost
// sectors, and one write makes at most maxWriteBytes durable. A log of
// 3 MiB written 64 KiB at a time, with 4 KiB zeroed in its middle (valid
// records follow for 1.5 MiB), is refused, naming the segment and the
// offset: the records after the hole were acknowledged. The same 4 KiB
// zeroed in the last write are lost sectors of an interrupted write: the
// log opens without that write's records from the hole on. Both hold for
// the log as written (a mark begins each write: the refusal names the
// write after the hole) and for the same records without marks, as
// releases before marks wrote them (the refusal says how far valid
// records follow the hole; guard wal-last-write).
func TestZeroedSectorBeforeTheLastWriteIsRefused(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	cfg.SegmentBytes = 8 << 20
	w := open(t, cfg)
	var last uint64
	for range 48 {
		var logs []*raft.Log
		for range 16 {
			last++
			logs = append(logs, sizedEntry("g", last, 4000))
		}
		store(t, w.Log("g"), logs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, src)[0]
	marked, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	for _, format := range []struct {
		name    string
		refusal *regexp.Regexp
		raw     []byte
	}{
		// The mark of the next write, or its records past the end of the
		// write that holds the hole.
		{"marked", regexp.MustCompile(`write \d+ begins after it|a valid record of a later write follows`), marked},
		{"without marks", regexp.MustCompile(`bytes past the damage`), withoutMarks(t, marked)},
	} {
		t.Run(format.name, func(t *testing.T) {
			lo := layout(t, format.raw)
			var offs, lens []int
			for i := uint64(1); i <= last; i++ {
				r := entryAt(t, lo, "g", i)
				offs, lens = append(offs, r.off), append(lens, r.n)
			}
			recEnd := offs[last-1] + lens[last-1]
			zeroed := func(t *testing.T, at int) Config {
				t.Helper()
				b := slices.Clone(format.raw)
				clear(b[at : at+4096])
				d := t.TempDir()
				if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
					t.Fatal(err)
				}
				c := cfg
				c.Dir = d
				return c
			}

			t.Run("middle of the log", func(t *testing.T) {
				at := recEnd / 2 &^ 4095
				c := zeroed(t, at)
				requireRefused(t, c.Dir, filepath.Join(c.Dir, filepath.Base(seg)), at)
				if _, err := Open(c, quiet(), nil); err == nil || !format.refusal.MatchString(err.Error()) {
					t.Fatalf("Open: %v; want %q", err, format.refusal)
				}
			})
			t.Run("last write", func(t *testing.T) {
				at := (offs[last-16] + 4095) &^ 4095
				if at+4096 > recEnd {
					t.Fatal("the last write is too short for the test")
				}
				w := open(t, zeroed(t, at))
				keep := firstDamaged(offs, lens, at, at+4096) - 1
				if keep < last-16 {
					t.Fatalf("the hole at %d damages entry %d, before the last write", at, keep+1)
				}
				checkRange(t, w.Log("g"), 1, keep)
				var e raft.Log
				if err := w.Log("g").GetLog(keep, &e); err != nil || !equalLog(&e, sizedEntry("g", keep, 4000)) {
					t.Fatalf("GetLog(%d): %v", keep, err)
				}
			})
		})
	}
}

// TestZeroedSectorOfAnEarlierWriteIsRefused: zeroed sectors of a write
// that a later write follows were synced before the later write began,
// even when the log ends less than one write (maxWriteBytes) after them:
// the records after them were acknowledged. A log of eight writes of
// 64 KiB (512 KiB, so valid records follow any hole for less than
// maxWriteBytes) is refused, naming the segment and the offset, with a
// sector zeroed in the middle of its last write but one (the mark of the
// last write follows it), and with the sectors that hold the end of that
// write and the mark of the last one zeroed (records past the end of the
// write that holds the hole follow it). Zeroed sectors of the last write
// are lost sectors of an interrupted write, also when they are its first
// (its mark lost): the log opens without that write's records from the
// hole on, every earlier one intact. Guard wal-write-marks: off, every
// one of these holes is cut off.
func TestZeroedSectorOfAnEarlierWriteIsRefused(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	cfg.SegmentBytes = 8 << 20
	w := open(t, cfg)
	var last uint64
	for range 8 {
		var logs []*raft.Log
		for range 16 {
			last++
			logs = append(logs, sizedEntry("g", last, 4000))
		}
		store(t, w.Log("g"), logs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, src)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	marks := marksOf(lo)
	var offs, lens []int
	for i := uint64(1); i <= last; i++ {
		r := entryAt(t, lo, "g", i)
		offs, lens = append(offs, r.off), append(lens, r.n)
	}
	recEnd := offs[last-1] + lens[last-1]
	if len(marks) != 8 || recEnd-segHeaderLen >= maxWriteBytes {
		t.Fatalf("%d writes of %d bytes", len(marks), recEnd-segHeaderLen)
	}
	lastMark := marks[7]
	zeroed := func(t *testing.T, from, to int) Config {
		t.Helper()
		b := slices.Clone(raw)
		clear(b[from:to])
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		c := cfg
		c.Dir = d
		return c
	}
	refused := func(t *testing.T, c Config, at int, why string) {
		t.Helper()
		w, err := Open(c, quiet(), nil)
		if err == nil {
			got, _ := w.Log("g").LastIndex()
			_ = w.Close()
			t.Fatalf("zeroed sectors at %d, before the last write, opened with the log ending at %d of %d", at, got, last)
		}
		msg := err.Error()
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(msg, filepath.Join(c.Dir, filepath.Base(seg))) ||
			!strings.Contains(msg, " offset ") || !strings.Contains(msg, why) || !strings.Contains(msg, "docs/operations.md") {
			t.Fatalf("Open: %v; want ErrCorrupt naming the segment, the offset and %q", err, why)
		}
		t.Logf("refused: %v", err)
	}
	opens := func(t *testing.T, c Config, from, to int) {
		t.Helper()
		w := open(t, c)
		keep := firstDamaged(offs, lens, from, to) - 1
		if keep == ^uint64(0) {
			keep = last
		}
		if keep < last-16 {
			t.Fatalf("the hole at %d damages entry %d, before the last write", from, keep+1)
		}
		checkRange(t, w.Log("g"), 1, keep)
		for i := uint64(1); i <= keep; i++ {
			var e raft.Log
			if err := w.Log("g").GetLog(i, &e); err != nil || !equalLog(&e, sizedEntry("g", i, 4000)) {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
		}
	}

	t.Run("a sector of the last write but one", func(t *testing.T) {
		at := (marks[6].off + 8192) &^ (sectorSize - 1)
		refused(t, zeroed(t, at, at+sectorSize), at, "begins after it")
	})
	t.Run("the end of the last write but one and the mark of the last", func(t *testing.T) {
		from := (lastMark.off - 1) &^ (sectorSize - 1)
		to := (lastMark.off + lastMark.n + sectorSize - 1) &^ (sectorSize - 1)
		refused(t, zeroed(t, from, to), from, "a valid record of a later write follows")
	})
	t.Run("a sector of the last write", func(t *testing.T) {
		at := (lastMark.off + 8192) &^ (sectorSize - 1)
		opens(t, zeroed(t, at, at+sectorSize), at, at+sectorSize)
	})
	t.Run("the first sector of the last write", func(t *testing.T) {
		// The sector that holds the end of the write before and the
		// start of the last: only the last write's part was lost.
		to := (lastMark.off + sectorSize) &^ (sectorSize - 1)
		opens(t, zeroed(t, lastMark.off, to+sectorSize), lastMark.off, to+sectorSize)
	})
}

// TestZeroedEndOfAnEarlierSegmentIsRefused: in a segment that is not the
// last, records zeroed up to its end (from a record boundary: no damaged
// record) read like the end of its records, and no valid record follows
// them in it. Every write to it was synced before the next segment
// began, and Open marks where it cut an interrupted write off, so records
// that end before the end of the segment's last write (its mark gives
// its length) were zeroed: Open refuses it, naming the segment and the
// offset. Guard wal-write-marks: off, the log opens without them.
func TestZeroedEndOfAnEarlierSegmentIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxSegments = 1000
	w := open(t, cfg)
	var last uint64
	for len(segments(t, cfg.Dir)) < 3 {
		var logs []*raft.Log
		for range 4 {
			last++
			logs = append(logs, sizedEntry("g", last, 1000))
		}
		store(t, w.Log("g"), logs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, cfg.Dir)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	end := lo[len(lo)-1]
	if end.rec.kind != kindEntry {
		t.Fatalf("the segment ends with %+v", end)
	}
	clear(raw[end.off : end.off+end.n])
	if err := os.WriteFile(seg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, cfg.Dir, seg, end.off)
	_, err = Open(cfg, quiet(), nil)
	if err == nil || !strings.Contains(err.Error(), "were zeroed") {
		t.Fatalf("Open: %v", err)
	}
	t.Logf("refused: %v", err)
}

// TestCutWriteIsMarked: Open cuts an interrupted last write off, and
// marks the cut with a mark of an empty write, so that the segment's last
// write is complete: when the next write starts another segment, the cut
// does not make the segment look zeroed (see
// TestZeroedEndOfAnEarlierSegmentIsRefused), and the log opens with
// every entry but the cut ones.
func TestCutWriteIsMarked(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxSegments = 1000
	w := open(t, cfg)
	store(t, w.Log("g"), entries("g", 1, 3, 1))
	store(t, w.Log("g"), entries("g", 4, 6, 1)) // the last write
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, cfg.Dir)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	r := entryAt(t, layout(t, raw), "g", 5)
	clear(raw[r.off:]) // the last write lost its records from 5 on
	if err := os.WriteFile(seg, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkEntries(t, w.Log("g"), 1, 4, 1)
	// Too large for the rest of the segment: the next write starts
	// another, right after the cut.
	store(t, w.Log("g"), []*raft.Log{sizedEntry("g", 5, int(cfg.SegmentBytes)-r.off)})
	if segs := segments(t, cfg.Dir); len(segs) != 2 {
		t.Fatalf("segments: %v", segs)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkRange(t, w.Log("g"), 1, 5)
	for i := uint64(1); i <= 5; i++ {
		want := entry("g", i, 1)
		if i == 5 {
			want = sizedEntry("g", 5, int(cfg.SegmentBytes)-r.off)
		}
		var e raft.Log
		if err := w.Log("g").GetLog(i, &e); err != nil || !equalLog(&e, want) {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
	}
}

// TestLogWithoutMarksOpens: a segment written before write marks existed
// (the same records without marks) opens with every entry, takes new
// writes (with marks) after its records, and opens again with all of
// them. A sector zeroed among its old records is then refused: a marked
// write follows it.
func TestLogWithoutMarksOpens(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	w := open(t, cfg)
	for i := uint64(1); i <= 60; i += 4 {
		store(t, w.Log("g"), entries("g", i, i+3, 1))
		store(t, w.Log("h"), entries("h", i, i+3, 2))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, src)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	old := withoutMarks(t, raw)
	if len(marksOf(layout(t, old))) != 0 {
		t.Fatal("marks left")
	}
	if err := os.WriteFile(seg, old, 0o600); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkEntries(t, w.Log("g"), 1, 60, 1)
	checkEntries(t, w.Log("h"), 1, 60, 2)
	store(t, w.Log("g"), entries("g", 61, 70, 1))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	w = open(t, cfg)
	checkEntries(t, w.Log("g"), 1, 70, 1)
	checkEntries(t, w.Log("h"), 1, 60, 2)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	raw, err = os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	marks := marksOf(lo)
	if len(marks) != 1 || marks[0].off != entryAt(t, lo, "g", 61).off-marks[0].n {
		t.Fatalf("marks %+v: want one, before g/61", marks)
	}
	at := entryAt(t, lo, "h", 10).off &^ (sectorSize - 1)
	if at+sectorSize >= marks[0].off {
		t.Fatal("the log written without marks is too short for the test")
	}
	clear(raw[at : at+sectorSize])
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, filepath.Base(seg)), raw, 0o600); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, dir, filepath.Join(dir, filepath.Base(seg)), at)
}

// TestLargeCommitsAreSyncedInPieces: one fdatasync makes at most
// maxWriteBytes of records durable, cut at record boundaries, and a
// larger record is written and synced alone, so that Open can bound how
// far valid records follow lost sectors of the last write. One StoreLogs
// of about 4.5 MiB (a record of 1.5 MiB among records of 64 KiB) is
// written in pieces that each hold at most maxWriteBytes or that one
// record; a crash image whose last piece lost a sector opens without the
// records from there on, and one whose first piece did is refused.
func TestLargeCommitsAreSyncedInPieces(t *testing.T) {
	mem := vfs.NewMem()
	var mu sync.Mutex
	var ops []errorfs.Op
	record := errorfs.InjectorFunc(func(op errorfs.Op) error {
		if strings.HasSuffix(op.Path, segmentSuffix) && (op.Kind == errorfs.OpWrite || op.Kind == errorfs.OpSync) {
			mu.Lock()
			ops = append(ops, op)
			mu.Unlock()
		}
		return nil
	})
	cfg := testConfig("/data/wal")
	cfg.SegmentBytes = 16 << 20
	cfg.FS = errorfs.Wrap(mem, record)
	w := open(t, cfg)
	store(t, w.Log("g"), entries("g", 1, 1, 1))
	var logs []*raft.Log
	for i := uint64(2); i <= 50; i++ {
		n := 64 << 10
		if i == 30 {
			n = 3 << 19
		}
		logs = append(logs, sizedEntry("g", i, n))
	}
	mu.Lock()
	ops = nil
	mu.Unlock()
	store(t, w.Log("g"), logs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segPath := filepath.Join(cfg.Dir, segmentName(1))
	f, err := mem.Open(segPath)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(f)
	_ = f.Close()
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	var offs, lens []int // of entries 2 to 50
	for i := uint64(2); i <= 50; i++ {
		r := entryAt(t, lo, "g", i)
		offs, lens = append(offs, r.off), append(lens, r.n)
	}
	start := marksOf(lo)[1].off
	recEnd := offs[48] + lens[48]

	// The pieces: from the first write after a sync to the next sync.
	var pieces [][2]int
	pieceStart := -1
	for _, op := range ops {
		switch op.Kind {
		case errorfs.OpWrite:
			if pieceStart < 0 {
				pieceStart = int(op.Offset)
			}
		case errorfs.OpSync:
			if pieceStart >= 0 {
				pieces = append(pieces, [2]int{pieceStart, -1})
				pieceStart = -1
			}
		}
	}
	if pieceStart >= 0 {
		t.Fatalf("a write at offset %d was never synced", pieceStart)
	}
	for k := range pieces {
		if k+1 < len(pieces) {
			pieces[k][1] = pieces[k+1][0]
		} else {
			pieces[k][1] = recEnd
		}
	}
	if len(pieces) < 5 || pieces[0][0] != start {
		t.Fatalf("%d bytes written in pieces %v", recEnd-start, pieces)
	}
	bigAt := offs[30-2]
	marks := map[int]laidOut{}
	for _, m := range marksOf(lo) {
		marks[m.off] = m
	}
	for _, p := range pieces {
		if p[1]-p[0] > maxWriteBytes && (p[0] >= bigAt || p[1] != bigAt+lens[30-2]) {
			t.Fatalf("one fdatasync covered [%d, %d), %d bytes, more than %d; pieces %v", p[0], p[1], p[1]-p[0], maxWriteBytes, pieces)
		}
		// Each begins with a mark that gives the length of the rest.
		if m, ok := marks[p[0]]; !ok || p[0]+m.n+int(m.rec.size) != p[1] {
			t.Fatalf("piece [%d, %d) begins with %+v, not the mark of its records", p[0], p[1], m)
		}
	}

	// Crash images that lost one sector of a piece.
	withHole := func(t *testing.T, at int) Config {
		t.Helper()
		img := mem.CrashClone()
		f, err := img.OpenFile(segPath, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt(make([]byte, sectorSize), int64(at)); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		c := cfg
		c.FS = img
		return c
	}
	t.Run("last piece", func(t *testing.T) {
		lastPiece := pieces[len(pieces)-1]
		at := (lastPiece[0] + 2*sectorSize - 1) &^ (sectorSize - 1)
		w := open(t, withHole(t, at))
		damaged := firstDamaged(offs, lens, at, at+sectorSize) + 1 // offs[0] is entry 2's
		keep := damaged - 1
		if keep < 30 {
			t.Fatalf("the hole at %d damages entry %d, before the last piece", at, damaged)
		}
		checkRange(t, w.Log("g"), 1, keep)
		for i := uint64(1); i <= keep; i++ {
			var e raft.Log
			if err := w.Log("g").GetLog(i, &e); err != nil || (i > 1 && !equalLog(&e, logs[i-2])) {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
		}
	})
	t.Run("first piece", func(t *testing.T) {
		at := (start + 2*sectorSize - 1) &^ (sectorSize - 1)
		w, err := Open(withHole(t, at), quiet(), nil)
		if err == nil {
			_ = w.Close()
			t.Fatalf("a hole at %d, in the first of %d synced pieces, opened", at, len(pieces))
		}
		if !strings.Contains(err.Error(), segPath) || !strings.Contains(err.Error(), "begins after it") {
			t.Fatalf("Open: %v", err)
		}
	})
}
