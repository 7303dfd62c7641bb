package wal

import (
	"bytes"
	"testing"

	"github.com/hashicorp/raft"
)

// FuzzDecodeRecord feeds arbitrary bytes to the record framing and
// decoder: they must never panic, and whatever they accept must encode
// back to the same bytes.
func FuzzDecodeRecord(f *testing.F) {
	f.Add(appendEntry(nil, "ks/1", entry("ks/1", 7, 3)))
	f.Add(appendEntry(nil, "", &raft.Log{Index: 1, Extensions: []byte{1}}))
	f.Add(appendDelete(nil, "g", 3, 1<<63))
	f.Add(appendMark(nil, 12, 4096))
	f.Add(make([]byte, headerLen))
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		n, st := checkFrame(b)
		if st != frameOK {
			return
		}
		var l raft.Log
		rec, err := decodeRecord(b[headerLen:n], &l)
		if err != nil {
			return
		}
		var again []byte
		switch rec.kind {
		case kindEntry:
			if l.Index != rec.index {
				t.Fatalf("index %d vs %d", l.Index, rec.index)
			}
			again = appendEntry(nil, rec.group, &l)
		case kindDelete:
			again = appendDelete(nil, rec.group, rec.min, rec.max)
		case kindMark:
			again = appendMark(nil, rec.seq, rec.size)
		default:
			t.Fatalf("accepted kind %d", rec.kind)
		}
		// Varints have several encodings of one value; compare decoded forms.
		rec2, err := decodeRecord(again[headerLen:], nil)
		if err != nil || rec2 != rec {
			t.Fatalf("re-encoded %+v as %+v (%v)", rec, rec2, err)
		}
		if rec.kind == kindEntry {
			var l2 raft.Log
			_, _ = decodeRecord(again[headerLen:], &l2)
			if l2.Term != l.Term || l2.Type != l.Type || !bytes.Equal(l2.Data, l.Data) ||
				!bytes.Equal(l2.Extensions, l.Extensions) || !l2.AppendedAt.Equal(l.AppendedAt) {
				t.Fatalf("entry %+v re-encoded as %+v", l, l2)
			}
		}
	})
}

// FuzzScan feeds arbitrary segment contents to recovery's scanner: it
// must never panic and never report records past the end it returns.
func FuzzScan(f *testing.F) {
	seed := appendEntry(nil, "g", entry("g", 1, 1))
	seed = appendDelete(seed, "g", 1, 1)
	f.Add(seed)
	f.Add(append(seed, 0, 0, 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		end, _, err := scan(bytes.NewReader(b), 0, int64(len(b)), func(off int64, n int, _ record) {
			if off+int64(n) > int64(len(b)) {
				t.Fatalf("record [%d, %d) past %d bytes", off, off+int64(n), len(b))
			}
		})
		if err != nil || end > int64(len(b)) {
			t.Fatalf("end %d of %d bytes, err %v", end, len(b), err)
		}
	})
}

// FuzzCheckTail feeds arbitrary bytes after a damaged record, and any
// extent of the write that holds it, to the checks that tell an
// interrupted write from corruption: they must never panic,
// and it must refuse whenever a whole valid record follows the damage
// with no zeroed sector before it.
func FuzzCheckTail(f *testing.F) {
	rec := appendEntry(nil, "g", entry("g", 1, 1))
	f.Add(append([]byte{0xFF}, rec...), int64(0), int64(0))
	f.Add(append(make([]byte, 600), rec...), int64(0), int64(0))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9}, int64(0), int64(0))
	f.Add(append(append(make([]byte, 600), appendMark(nil, 2, uint64(len(rec)))...), rec...), int64(0), int64(1000))
	f.Fuzz(func(t *testing.T, b []byte, start, end int64) {
		in := write{seq: 1, start: start, end: end}
		_, _ = checkTail(bytes.NewReader(b), 0, int64(len(b)), in)
		_ = checkClean(bytes.NewReader(b), 0, int64(len(b)), in)
	})
}
