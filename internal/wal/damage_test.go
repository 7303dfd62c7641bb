package wal

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// damagedLog writes a log of 40 entries of group g, one write each, into
// one segment, and returns the segment's path, its bytes and the offset
// of every record.
func damagedLog(t *testing.T) (dir, seg string, raw []byte, offs []int) {
	t.Helper()
	dir = t.TempDir()
	w := open(t, testConfig(dir))
	for i := uint64(1); i <= 40; i++ {
		e := entry("g", i, 1)
		e.Data = bytes.Repeat([]byte{byte('a' + i%26)}, 300)
		store(t, w.Log("g"), []*raft.Log{e})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, dir)
	if len(segs) != 1 {
		t.Fatalf("segments: %v", segs)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	lo := layout(t, raw)
	for i := uint64(1); i <= 40; i++ {
		offs = append(offs, entryAt(t, lo, "g", i).off)
	}
	return dir, segs[0], raw, offs
}

// requireRefused opens dir and requires ErrCorrupt with a message that
// names the segment, the offset of the damage and the recovery procedure.
func requireRefused(t *testing.T, dir, seg string, at int) {
	t.Helper()
	w, err := Open(testConfig(dir), quiet(), nil)
	if err == nil {
		_ = w.Close()
		t.Fatalf("damage at offset %d: the log opened", at)
	}
	msg := err.Error()
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(msg, seg) || !strings.Contains(msg, "docs/operations.md") ||
		!strings.Contains(msg, " offset ") {
		t.Fatalf("damage at offset %d: %v", at, err)
	}
}

// TestDamageBeforeValidRecordsIsRefused flips bytes in the middle of the
// last (and only) segment, at several offsets and in every part of a
// record, with valid records after them: that is corruption, not an
// interrupted write, and Open refuses it instead of cutting the log off
// there.
func TestDamageBeforeValidRecordsIsRefused(t *testing.T) {
	dir, seg, raw, offs := damagedLog(t)
	cases := map[string]int{
		"first record's checksum":     offs[0],
		"first record's length":       offs[0] + 5,
		"first record's kind":         offs[0] + headerLen,
		"first record's group length": offs[0] + headerLen + 1,
		"a record's index":            offs[3] + headerLen + 3,
		"a record's data":             offs[10] + headerLen + 100,
		"the middle of the log":       offs[20] + 200,
		"the last but one record":     offs[38] + headerLen + 50,
	}
	for name, at := range cases {
		t.Run(name, func(t *testing.T) {
			for _, flip := range []byte{0x01, 0x80, 0xFF} {
				b := slices.Clone(raw)
				b[at] ^= flip
				d := t.TempDir()
				if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
					t.Fatal(err)
				}
				requireRefused(t, d, filepath.Join(d, filepath.Base(seg)), at)
			}
		})
	}
	// Several bytes of a record overwritten with garbage.
	b := slices.Clone(raw)
	copy(b[offs[5]+20:], "garbage garbage garbage")
	d := t.TempDir()
	if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, d, filepath.Join(d, filepath.Base(seg)), offs[5]+20)
	// A record of an earlier, synced write zeroed whole: it is not a lost
	// part of the last write, which began after it was durable.
	b = slices.Clone(raw)
	clear(b[offs[7]:offs[8]]) // the record of entry 8 and the mark of the next write
	d = t.TempDir()
	if err := os.WriteFile(filepath.Join(d, filepath.Base(seg)), b, 0o600); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, d, filepath.Join(d, filepath.Base(seg)), offs[7])
	// The original still opens, whole.
	checkRange(t, open(t, testConfig(dir)).Log("g"), 1, 40)
}

// TestDamageInAnEarlierSegmentIsRefused: records zeroed in a segment that
// is not the last look like its end; the valid records after them, and
// the later segments, make it corruption.
func TestDamageInAnEarlierSegmentIsRefused(t *testing.T) {
	cfg := testConfig(t.TempDir())
	cfg.MaxSegments = 1000
	w := open(t, cfg)
	for i := uint64(1); i <= 200; i++ {
		e := entry("g", i, 1)
		e.Data = bytes.Repeat([]byte{7}, 1000)
		store(t, w.Log("g"), []*raft.Log{e})
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	segs := segments(t, cfg.Dir)
	if len(segs) < 3 {
		t.Fatalf("segments: %v", segs)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	r := entryAt(t, layout(t, raw), "g", 4)
	at := r.off
	clear(raw[at : at+r.n])
	if err := os.WriteFile(segs[0], raw, 0o600); err != nil {
		t.Fatal(err)
	}
	requireRefused(t, cfg.Dir, segs[0], at)
}

// TestValidRecordsInsideDataAreNotRecords: an entry whose data holds a
// whole framed record (a log stored as a value) and is torn in front of
// it still opens: the embedded record is not followed by a record.
func TestValidRecordsInsideDataAreNotRecords(t *testing.T) {
	src := t.TempDir()
	w := open(t, testConfig(src))
	store(t, w.Log("g"), entries("g", 1, 3, 1))
	inner := appendEntry(nil, "g", entry("g", 9, 9))
	e := entry("g", 4, 1)
	e.Data = append(append(bytes.Repeat([]byte{1}, 64), inner...), bytes.Repeat([]byte{2}, 64)...)
	store(t, w.Log("g"), []*raft.Log{e})
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segments(t, src)[0]
	raw, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	last := entryAt(t, layout(t, raw), "g", 4).off
	b := slices.Clone(raw)
	b[last+headerLen+20] ^= 0x10 // damaged before the embedded record
	if err := os.WriteFile(seg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	checkEntries(t, open(t, testConfig(src)).Log("g"), 1, 3, 1)
}

// TestExistingLogMustBeThere: with Config.Existing (raft.db says the log
// was used), a missing directory, an empty one, and an only segment
// without a valid header (an empty or zeroed file in place of the
// segment) fail Open with ErrMissing, and Open creates and removes
// nothing: the next Open fails the same way. Without Existing, an only
// segment without a header is an interrupted creation and is removed;
// with Existing, an incomplete segment after a complete one still is.
func TestExistingLogMustBeThere(t *testing.T) {
	existing := func(dir string) Config {
		cfg := testConfig(dir)
		cfg.Existing = true
		return cfg
	}
	refused := func(t *testing.T, cfg Config) {
		t.Helper()
		for range 2 {
			w, err := Open(cfg, quiet(), nil)
			if err == nil {
				_ = w.Close()
				t.Fatal("a used log that is gone opened")
			}
			if !errors.Is(err, ErrMissing) {
				t.Fatalf("Open: %v", err)
			}
		}
	}

	t.Run("missing directory", func(t *testing.T) {
		dir := filepath.Join(t.TempDir(), "wal")
		refused(t, existing(dir))
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("Open created %s: %v", dir, err)
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		dir := t.TempDir()
		refused(t, existing(dir))
		if segs := segments(t, dir); len(segs) != 0 {
			t.Fatalf("Open created %v", segs)
		}
	})
	for _, content := range [][]byte{nil, make([]byte, segHeaderLen)} {
		t.Run(fmt.Sprintf("only segment of %d zero bytes", len(content)), func(t *testing.T) {
			dir, seg, _, _ := damagedLog(t)
			if err := os.WriteFile(seg, content, 0o600); err != nil {
				t.Fatal(err)
			}
			refused(t, existing(dir))
			if segs := segments(t, dir); !slices.Equal(segs, []string{seg}) {
				t.Fatalf("segments after a refused Open: %v, want %v", segs, []string{seg})
			}
			if b, err := os.ReadFile(seg); err != nil || !bytes.Equal(b, content) {
				t.Fatalf("the segment changed: %d bytes, %v", len(b), err)
			}
			// A log never used (no record of it) takes it for an
			// interrupted creation.
			w := open(t, testConfig(dir))
			if len(w.Groups()) != 0 {
				t.Fatalf("groups: %v", w.Groups())
			}
		})
	}
	t.Run("interrupted creation after a complete segment", func(t *testing.T) {
		dir, seg, _, _ := damagedLog(t)
		next := filepath.Join(dir, segmentName(2))
		if err := os.WriteFile(next, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		w := open(t, existing(dir))
		checkRange(t, w.Log("g"), 1, 40)
		if segs := segments(t, dir); !slices.Equal(segs, []string{seg}) {
			t.Fatalf("segments: %v", segs)
		}
	})
}
