package wal

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
)

// Record framing. Every record is
//
//	crc32c (4 bytes, little endian) over everything after it
//	length (4 bytes, little endian) of the body
//	body   (length bytes): kind (1 byte) ‖ uvarint len(group) ‖ group ‖ ...
//
// An entry body continues with uvarint index, uvarint term, type (1 byte),
// varint appended-at (unix ns, 0 for none), uvarint len(data) ‖ data,
// uvarint len(extensions) ‖ extensions. A delete body continues with
// uvarint min, uvarint max: it removes the group's entries in [min, max].
// A mark body (group empty) continues with uvarint seq, uvarint length: it
// begins write seq, whose records are the length bytes that follow it
// (writeRecords; Open tells the last write from earlier ones with it,
// tail.go). A header of eight zero bytes marks the end of a segment's
// records.
const (
	headerLen = 8
	// maxBody bounds a record's body; a larger length field is corruption.
	maxBody = 1 << 30
)

type kind byte

const (
	kindEntry  kind = 1
	kindDelete kind = 2
	// kindMark begins a write (one fdatasync). Logs written before it
	// existed have none; they still open (TestLogWithoutMarksOpens).
	kindMark kind = 3
)

// maxMarkLen bounds the length of a framed mark record.
const maxMarkLen = headerLen + 2 + 2*binary.MaxVarintLen64

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// record is a decoded record body. For kindEntry, index is the entry's;
// for kindDelete, min and max the deleted range; for kindMark, seq and
// size the write's sequence number and the length of its records after
// the mark.
type record struct {
	kind      kind
	group     string
	index     uint64 // kindEntry
	min, max  uint64 // kindDelete
	seq, size uint64 // kindMark
}

// appendEntry appends the framed record of one raft log entry to b.
func appendEntry(b []byte, group string, l *raft.Log) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, byte(kindEntry))
	b = binary.AppendUvarint(b, uint64(len(group)))
	b = append(b, group...)
	b = binary.AppendUvarint(b, l.Index)
	b = binary.AppendUvarint(b, l.Term)
	b = append(b, byte(l.Type))
	var at int64
	if !l.AppendedAt.IsZero() {
		at = l.AppendedAt.UnixNano()
	}
	b = binary.AppendVarint(b, at)
	b = binary.AppendUvarint(b, uint64(len(l.Data)))
	b = append(b, l.Data...)
	b = binary.AppendUvarint(b, uint64(len(l.Extensions)))
	b = append(b, l.Extensions...)
	return seal(b, start)
}

// appendDelete appends the framed record deleting group's entries in
// [min, max] to b.
func appendDelete(b []byte, group string, min, max uint64) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, byte(kindDelete))
	b = binary.AppendUvarint(b, uint64(len(group)))
	b = append(b, group...)
	b = binary.AppendUvarint(b, min)
	b = binary.AppendUvarint(b, max)
	return seal(b, start)
}

// appendMark appends the framed mark record that begins write seq, whose
// records are the size bytes after the mark, to b.
func appendMark(b []byte, seq, size uint64) []byte {
	start := len(b)
	b = append(b, make([]byte, headerLen)...)
	b = append(b, byte(kindMark), 0) // no group
	b = binary.AppendUvarint(b, seq)
	b = binary.AppendUvarint(b, size)
	return seal(b, start)
}

// seal fills in the header of the record that starts at b[start].
func seal(b []byte, start int) []byte {
	binary.LittleEndian.PutUint32(b[start+4:], uint32(len(b)-start-headerLen))
	binary.LittleEndian.PutUint32(b[start:], crc32.Checksum(b[start+4:], castagnoli))
	return b
}

// frameStatus classifies the bytes at the start of a buffer.
type frameStatus int

const (
	frameOK      frameStatus = iota + 1
	frameEnd                 // eight zero bytes: no more records
	frameShort               // fewer bytes than the header or body needs
	frameCorrupt             // bad length or checksum
)

// checkFrame inspects the record at the start of b. It returns the total
// record length (header included) when the status is frameOK, and the body
// length announced by the header when frameShort (0 if even the header is
// incomplete).
func checkFrame(b []byte) (n int, st frameStatus) {
	if len(b) < headerLen {
		return 0, frameShort
	}
	sum := binary.LittleEndian.Uint32(b)
	length := binary.LittleEndian.Uint32(b[4:])
	if sum == 0 && length == 0 {
		return 0, frameEnd
	}
	if length == 0 || length > maxBody {
		return 0, frameCorrupt
	}
	if len(b) < headerLen+int(length) {
		return int(length), frameShort
	}
	if crc32.Checksum(b[4:headerLen+int(length)], castagnoli) != sum {
		return 0, frameCorrupt
	}
	return headerLen + int(length), frameOK
}

// decodeRecord decodes a checked record body (without the header). For an
// entry it decodes the log into out when out is not nil; out's Data and
// Extensions then alias body.
func decodeRecord(body []byte, out *raft.Log) (record, error) {
	var r record
	d := decoder{b: body}
	r.kind = kind(d.byte())
	r.group = string(d.chunk())
	switch r.kind {
	case kindEntry:
		r.index = d.uvarint()
		term := d.uvarint()
		typ := raft.LogType(d.byte())
		at := d.varint()
		data := d.chunk()
		ext := d.chunk()
		if d.err == nil && out != nil {
			*out = raft.Log{Index: r.index, Term: term, Type: typ, Data: data, Extensions: ext}
			if at != 0 {
				out.AppendedAt = time.Unix(0, at)
			}
		}
	case kindDelete:
		r.min = d.uvarint()
		r.max = d.uvarint()
	case kindMark:
		r.seq = d.uvarint()
		r.size = d.uvarint()
		if d.err == nil && r.group != "" {
			return r, fmt.Errorf("%w: a write mark with a group", ErrCorrupt)
		}
	default:
		if d.err == nil {
			return r, fmt.Errorf("%w: unknown record kind %d", ErrCorrupt, r.kind)
		}
	}
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%w: %d trailing bytes in record", ErrCorrupt, len(d.b))
	}
	return r, d.err
}

type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w: truncated record body", ErrCorrupt)
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) == 0 {
		d.fail()
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) chunk() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	if n == 0 {
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
