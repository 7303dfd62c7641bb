package wal

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/causeway-db/causeway/internal/guards"
)

// What may follow the records of a segment.
//
// Records are appended, each batch with one write and one fdatasync; a
// batch is written only after the previous one is durable, and space
// past the records is preallocated as zeros (a new segment, and the last
// segment again on every Open). So the only damage a crash can leave is
// in the last write, at the end of the last segment: a write cut short
// (the rest of the file reads as zeros) or, because the disk may persist
// the sectors of one write in any order, some sectors of the last write
// lost (zeros) and later ones intact.
//
// The last write is also bounded: the committer makes at most
// maxWriteBytes durable with one fdatasync (writeRecords), cut at record
// boundaries, and writes a larger record alone. So the valid records that
// follow lost sectors of the last write end at most maxWriteBytes after
// the first damaged byte (a lone larger record has no valid record after
// its damage); zeroed sectors that valid records follow further than that
// are not part of the last write.
//
// Every write also begins with a mark record (appendMark) naming the
// write and the length of its records. A write is issued only once every
// earlier one is durable, so valid records that lie past the end of the
// write holding the damage, or a mark after the damage (a later write
// began), mean that the damaged bytes had been synced: not an interrupted
// write, even within maxWriteBytes of it. Logs written before marks
// existed have none, and only the maxWriteBytes bound applies to them.
//
// Anything else (a damaged record, or an end of records, followed by
// valid records) is corruption: cutting the log there would silently drop
// acknowledged entries. checkTail and checkClean tell the two apart.

// sectorSize is the unit a disk writes atomically: a lost part of an
// interrupted write is at least one aligned, zeroed sector.
const sectorSize = 512

// maxWriteBytes bounds the records one fdatasync makes durable
// (writeRecords), a single larger record excepted. Open takes it as the
// largest possible last write (checkTail): lowering it would make Open
// refuse the torn last write of a log written with the larger bound.
const maxWriteBytes = 1 << 20

// write is one write (one fdatasync) as its mark describes it: sequence
// number seq, from the mark at start to end (mark and records).
type write struct {
	seq        uint64
	start, end int64
}

// holds reports whether the write's records reach past off: the damage
// that scanning found at off is inside the write. The zero write holds
// nothing (a log or segment part without marks).
func (w write) holds(off int64) bool { return w.start < off && off < w.end }

// checkTail is called for the last segment (size bytes, read through r)
// whose good records end at end, followed by damage or an end marker; in
// is the write of the last mark before end. It returns nil when the
// damage can be an interrupted last write: nothing valid follows it, or
// every stretch of damage before a valid record overlaps an aligned
// sector of zeros (lost sectors of that write); then dropped is the
// offset of the first valid record cut off with it, or -1. It returns an
// error describing the damage otherwise: also when valid records follow
// the damage further than one write holds (maxWriteBytes), when a mark
// follows it (a later write began after the damaged bytes were synced),
// or when a valid record follows the end of the write that holds it
// (in).
func checkTail(r io.ReaderAt, end, size int64, in write) (dropped int64, err error) {
	dropped = -1
	d := end
	beyond := func(at int64) error {
		if at-end <= maxWriteBytes || guards.Off(guards.WALLastWrite) {
			return nil
		}
		return fmt.Errorf("valid records follow up to offset %d, %d bytes past the damage, more than the %d bytes one write makes durable, so this is not an interrupted write", at, at-end, maxWriteBytes)
	}
	// later returns an error if the valid record rec at off was written
	// by a later write than the damage at end.
	later := func(off int64, rec record) error {
		if guards.Off(guards.WALWriteMarks) {
			return nil
		}
		if rec.kind == kindMark {
			return fmt.Errorf("write %d begins after it, at offset %d (a write begins only once every earlier one is durable), so this is not an interrupted write", rec.seq, off)
		}
		if in.holds(end) && off >= in.end {
			return fmt.Errorf("it lies in write %d (offsets %d to %d), which a valid record of a later write follows at offset %d, so this is not an interrupted write", in.seq, in.start, in.end, off)
		}
		return nil
	}
	for {
		p, err := nextValid(r, d+1, size)
		if err != nil || p < 0 {
			return dropped, err
		}
		lost, err := zeroSector(r, d, p)
		if err != nil {
			return dropped, err
		}
		if !lost {
			return dropped, fmt.Errorf("a valid record follows at offset %d, so this is not an interrupted write", p)
		}
		if dropped < 0 {
			dropped = p
		}
		// Lost sectors of the last write; what follows them must be
		// part of the same write: records, or more lost sectors.
		var lerr error
		next, tail, err := scan(io.NewSectionReader(r, p, size-p), p, size-p, func(off int64, _ int, rec record) {
			if lerr == nil {
				lerr = later(off, rec)
			}
		})
		if err != nil {
			return dropped, err
		}
		if lerr != nil {
			return dropped, lerr
		}
		if err := beyond(next); err != nil {
			return dropped, err
		}
		if tail == nil && next >= size {
			return dropped, nil
		}
		d = next
	}
}

// checkClean is called for a segment that is not the last, whose records
// end with an end marker (or the end of the file) at end; in is the write
// of its last mark. It returns an error if a valid record follows (the
// end marker is then zeroed records), or if the records end inside in:
// every write to a segment before the last was synced before the next
// segment began, and Open marks where it cut an interrupted write off.
func checkClean(r io.ReaderAt, end, size int64, in write) error {
	p, err := nextValid(r, end+1, size)
	if err != nil {
		return err
	}
	if p >= 0 {
		return fmt.Errorf("zeroed records are followed by a valid record at offset %d", p)
	}
	if in.holds(end) && !guards.Off(guards.WALWriteMarks) {
		return fmt.Errorf("the records of write %d (offsets %d to %d) end here, and every write to a segment before the last was synced: its records after this offset were zeroed", in.seq, in.start, in.end)
	}
	return nil
}

// nextValid returns the first offset in [from, size) at which a valid
// record starts (see validAt), or -1 if there is none.
func nextValid(r io.ReaderAt, from, size int64) (int64, error) {
	const chunk = 1 << 20
	if from >= size {
		return -1, nil
	}
	buf := make([]byte, min(chunk, size-from)+2*headerLen)
	for base := from; base < size; base += chunk {
		n := int(min(int64(len(buf)), size-base))
		if _, err := r.ReadAt(buf[:n], base); err != nil && !errors.Is(err, io.EOF) {
			return -1, fmt.Errorf("wal: reading at offset %d: %w", base, err)
		}
		b := buf[:n]
		for i := 0; i < chunk && i+headerLen <= n; i++ {
			if (base+int64(i))%8 == 0 && i+16 <= n && binary.LittleEndian.Uint64(b[i:]) == 0 && binary.LittleEndian.Uint64(b[i+8:]) == 0 {
				// Sixteen zero bytes: no record can start in the first
				// nine of them (its length field would be zero).
				i += 8
				continue
			}
			length := binary.LittleEndian.Uint32(b[i+4:])
			if length < 2 || length > maxBody || base+int64(i)+headerLen+int64(length) > size {
				continue
			}
			ok, err := validAt(r, base+int64(i), int64(length), size)
			if err != nil {
				return -1, err
			}
			if ok {
				return base + int64(i), nil
			}
		}
	}
	return -1, nil
}

// validAt reports whether a record of body length length at off is valid
// and in place: it passes its checksum and decodes, and it is followed by
// the end of the file, an end marker or another valid record. The last
// condition keeps a record that happens to be embedded in an entry's data
// from counting.
func validAt(r io.ReaderAt, off, length, size int64) (bool, error) {
	if ok, err := plausible(r, off, length); !ok || err != nil {
		return false, err
	}
	ok, err := recordAt(r, off, length)
	if !ok || err != nil {
		return false, err
	}
	next := off + headerLen + length
	if next+headerLen > size {
		return true, nil
	}
	hdr := make([]byte, headerLen)
	if _, err := r.ReadAt(hdr, next); err != nil {
		return false, fmt.Errorf("wal: reading at offset %d: %w", next, err)
	}
	l2 := int64(binary.LittleEndian.Uint32(hdr[4:]))
	if binary.LittleEndian.Uint32(hdr) == 0 && l2 == 0 {
		return true, nil
	}
	if l2 < 2 || l2 > maxBody || next+headerLen+l2 > size {
		return false, nil
	}
	return recordAt(r, next, l2)
}

// recordAt reports whether the record of body length length at off
// passes its checksum and decodes.
func recordAt(r io.ReaderAt, off, length int64) (bool, error) {
	buf := make([]byte, headerLen+length)
	if _, err := r.ReadAt(buf, off); err != nil {
		return false, fmt.Errorf("wal: reading at offset %d: %w", off, err)
	}
	n, st := checkFrame(buf)
	if st != frameOK || n != len(buf) {
		return false, nil
	}
	_, err := decodeRecord(buf[headerLen:], nil)
	return err == nil, nil
}

// plausible cheaply rejects most offsets that cannot start a record of
// body length length, before its checksum is computed over up to a
// gigabyte: the kind must be known and an entry's fields must add up to
// exactly length.
func plausible(r io.ReaderAt, off, length int64) (bool, error) {
	pre := make([]byte, min(length, 512))
	if _, err := r.ReadAt(pre, off+headerLen); err != nil {
		return false, fmt.Errorf("wal: reading at offset %d: %w", off, err)
	}
	d := decoder{b: pre}
	switch kind(d.byte()) {
	case kindDelete, kindMark:
		return length <= int64(len(pre)), nil
	case kindEntry:
	default:
		return false, nil
	}
	d.chunk() // group
	d.uvarint()
	d.uvarint()
	d.byte()
	d.varint()
	dlen := d.uvarint()
	if d.err != nil || dlen > uint64(length) {
		return false, nil
	}
	extAt := int64(len(pre)-len(d.b)) + int64(dlen)
	if extAt >= length {
		return false, nil
	}
	ext := make([]byte, min(binary.MaxVarintLen64, length-extAt))
	if _, err := r.ReadAt(ext, off+headerLen+extAt); err != nil {
		return false, fmt.Errorf("wal: reading at offset %d: %w", off, err)
	}
	elen, n := binary.Uvarint(ext)
	return n > 0 && uint64(extAt)+uint64(n)+elen == uint64(length), nil
}

// zeroSector reports whether an aligned sector that overlaps [from, to)
// holds only zeros.
func zeroSector(r io.ReaderAt, from, to int64) (bool, error) {
	start := from / sectorSize * sectorSize
	buf := make([]byte, sectorSize)
	for at := start; at < to; at += sectorSize {
		n, err := r.ReadAt(buf, at)
		if err != nil && !errors.Is(err, io.EOF) {
			return false, fmt.Errorf("wal: reading at offset %d: %w", at, err)
		}
		if n == sectorSize && isZero(buf) {
			return true, nil
		}
	}
	return false, nil
}
