package wal

import (
	"bytes"
	"os"
	"path/filepath"
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

// TestZeroedSectorBeforeTheLastWriteIsRefused: after a crash (a machine
// restart: the page cache is gone), only the last write can have lost
// sectors, and one write makes at most maxWriteBytes durable. A log of
// 3 MiB written 64 KiB at a time, with 4 KiB zeroed in its middle (valid
// records follow for 1.5 MiB), is refused, naming the segment and the
// offset: the records after the hole were acknowledged. The same 4 KiB
// zeroed in the last write are lost sectors of an interrupted write: the
// log opens without that write's records from the hole on.
func TestZeroedSectorBeforeTheLastWriteIsRefused(t *testing.T) {
	src := t.TempDir()
	cfg := testConfig(src)
	cfg.SegmentBytes = 8 << 20
	w := open(t, cfg)
	var offs, lens, writes []int
	off := segHeaderLen
	var last uint64
	for range 48 {
		writes = append(writes, off)
		var logs []*raft.Log
		for range 16 {
			last++
			e := sizedEntry("g", last, 4000)
			logs = append(logs, e)
			n := len(appendEntry(nil, "g", e))
			offs, lens = append(offs, off), append(lens, n)
			off += n
		}
		store(t, w.Log("g"), logs)
	}
	recEnd := off
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, src)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	zeroed := func(t *testing.T, at int) string {
		t.Helper()
		b := slices.Clone(raw)
		clear(b[at : at+4096])
		d := t.TempDir()
		if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
			t.Fatal(err)
		}
		return d
	}

	t.Run("middle of the log", func(t *testing.T) {
		at := recEnd / 2 &^ 4095
		d := zeroed(t, at)
		requireRefused(t, d, filepath.Join(d, filepath.Base(seg)), at)
		dcfg := cfg
		dcfg.Dir = d
		if _, err := Open(dcfg, quiet(), nil); err == nil || !strings.Contains(err.Error(), "bytes past the damage") {
			t.Fatalf("Open: %v", err)
		}
	})
	t.Run("last write", func(t *testing.T) {
		at := (writes[len(writes)-1] + 4095) &^ 4095
		if at+4096 > recEnd {
			t.Fatal("the last write is too short for the test")
		}
		d := zeroed(t, at)
		dcfg := cfg
		dcfg.Dir = d
		w := open(t, dcfg)
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
	start := segHeaderLen + len(appendEntry(nil, "g", entry("g", 1, 1)))
	var logs []*raft.Log
	var offs, lens []int
	off := start
	for i := uint64(2); i <= 50; i++ {
		n := 64 << 10
		if i == 30 {
			n = 3 << 19
		}
		e := sizedEntry("g", i, n)
		logs = append(logs, e)
		l := len(appendEntry(nil, "g", e))
		offs, lens = append(offs, off), append(lens, l)
		off += l
	}
	recEnd := off
	mu.Lock()
	ops = nil
	mu.Unlock()
	store(t, w.Log("g"), logs)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

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
	for _, p := range pieces {
		if p[1]-p[0] > maxWriteBytes && (p[0] != bigAt || p[1] != bigAt+lens[30-2]) {
			t.Fatalf("one fdatasync covered [%d, %d), %d bytes, more than %d; pieces %v", p[0], p[1], p[1]-p[0], maxWriteBytes, pieces)
		}
	}

	// Crash images that lost one sector of a piece.
	segPath := filepath.Join(cfg.Dir, segmentName(1))
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
		if !strings.Contains(err.Error(), segPath) || !strings.Contains(err.Error(), "bytes past the damage") {
			t.Fatalf("Open: %v", err)
		}
	})
}
