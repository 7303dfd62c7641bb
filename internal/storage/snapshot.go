package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Shard snapshot stream:
//
//	"CWSNAP" format(1 byte)
//	records: tag(1 byte: 1 data, 2 state, 3 requests, 4 outbound) | klen uvarint | key | vlen uvarint | value
//
// Format 2 holds request records as stored since on-disk format 2 (keys in
// commit order, requests.go); a format-1 stream (client id ‖ 0x00 ‖ seq →
// hlc ‖ outcome) is converted as it is restored.
//
//	tag 0 | crc32c (4 bytes BE) of every byte before it
const (
	snapMagic   = "CWSNAP"
	snapFormat  = 2
	tagData     = 1
	tagState    = 2
	tagRequests = 3
	tagOutbound = 4
	tagEnd      = 0
	maxSnapKV   = 64 << 20
)

// ErrBadSnapshot is returned by RestoreShard for a damaged stream.
var ErrBadSnapshot = errors.New("storage: bad snapshot")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

var snapBuckets = [][]byte{nil, bucketData, bucketState, bucketRequests, bucketOutbound}

// WriteShardSnapshot streams the state of shard id, as of tx, to w.
func (tx *Tx) WriteShardSnapshot(id ShardID, w io.Writer) error {
	h := crc32.New(castagnoli)
	bw := bufio.NewWriterSize(io.MultiWriter(w, h), 256<<10)
	if _, err := bw.WriteString(snapMagic); err != nil {
		return err
	}
	_ = bw.WriteByte(snapFormat)
	root := tx.btx.Bucket(id.bucket())
	var lenBuf [binary.MaxVarintLen64]byte
	for tag := 1; tag < len(snapBuckets) && root != nil; tag++ {
		b := root.Bucket(snapBuckets[tag])
		if b == nil {
			continue
		}
		err := b.ForEach(func(k, v []byte) error {
			if tag == tagData {
				// A snapshot carries versions without their checksums
				// (its own covers them), after checking them: a damaged
				// version must not reach another replica.
				if _, err := checkValue(k, v); err != nil {
					return tx.db.noteDamage(err)
				}
				v = storedValue(v)
			}
			if what, sealed := sealedBucket(snapBuckets[tag]); sealed {
				// Records travel without their seals (the snapshot's
				// checksum covers them), after checking them.
				u, err := unseal(what, k, v)
				if err != nil {
					return tx.db.noteDamage(err)
				}
				v = u
			}
			_ = bw.WriteByte(byte(tag))
			_, _ = bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(k)))])
			_, _ = bw.Write(k)
			_, _ = bw.Write(lenBuf[:binary.PutUvarint(lenBuf[:], uint64(len(v)))])
			_, err := bw.Write(v)
			return err
		})
		if err != nil {
			return fmt.Errorf("snapshot %s: %w", id, err)
		}
	}
	_ = bw.WriteByte(tagEnd)
	if err := bw.Flush(); err != nil {
		return err
	}
	_, err := w.Write(binary.BigEndian.AppendUint32(nil, h.Sum32()))
	return err
}

// RestoreShard replaces the state of shard id with the snapshot read from
// r. The replacement is atomic: a damaged stream leaves the shard as it was.
func (tx *Tx) RestoreShard(id ShardID, r io.Reader) error {
	h := crc32.New(castagnoli)
	br := bufio.NewReaderSize(r, 256<<10)
	tr := io.TeeReader(br, h)
	head := make([]byte, len(snapMagic)+1)
	if _, err := io.ReadFull(tr, head); err != nil || string(head[:len(snapMagic)]) != snapMagic {
		return fmt.Errorf("%w: missing header", ErrBadSnapshot)
	}
	format := head[len(snapMagic)]
	if format != snapFormat && format != 1 {
		return fmt.Errorf("%w: format %d", ErrBadSnapshot, format)
	}
	if tx.db != nil {
		tx.db.reqIdx.drop(id)
	}
	if err := tx.btx.DeleteBucket(id.bucket()); err != nil && !errors.Is(err, berrors.ErrBucketNotFound) {
		return err
	}
	s, err := tx.Shard(id)
	if err != nil {
		return err
	}
	dst := []*bolt.Bucket{nil, s.data, s.state, s.reqs, s.out}
	bb := byteReader{tr}
	for {
		tag, err := bb.ReadByte()
		if err != nil {
			return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
		}
		if tag == tagEnd {
			break
		}
		if int(tag) >= len(dst) {
			return fmt.Errorf("%w: unknown record tag %d", ErrBadSnapshot, tag)
		}
		k, err := readChunk(bb)
		if err != nil {
			return err
		}
		if len(k) == 0 || len(k) > bolt.MaxKeySize {
			return fmt.Errorf("%w: record key of %d bytes", ErrBadSnapshot, len(k))
		}
		v, err := readChunk(bb)
		if err != nil {
			return err
		}
		if tag == tagRequests && format == 1 {
			if len(v) < 8 {
				return fmt.Errorf("%w: request record of %d bytes", ErrBadSnapshot, len(v))
			}
			k, v = append(v[:8:8], k...), v[8:]
		}
		switch tag {
		case tagData:
			if v, err = sealValue(k, v); err != nil {
				return fmt.Errorf("%w: %v", ErrBadSnapshot, err)
			}
		case tagState, tagRequests, tagOutbound:
			v = seal(k, v)
		}
		if err := dst[tag].Put(k, v); err != nil {
			return err
		}
	}
	want := h.Sum32()
	var sum [4]byte
	if _, err := io.ReadFull(br, sum[:]); err != nil {
		return fmt.Errorf("%w: missing checksum", ErrBadSnapshot)
	}
	if binary.BigEndian.Uint32(sum[:]) != want {
		return fmt.Errorf("%w: checksum mismatch", ErrBadSnapshot)
	}
	return nil
}

type byteReader struct{ io.Reader }

func (b byteReader) ReadByte() (byte, error) {
	var one [1]byte
	_, err := io.ReadFull(b.Reader, one[:])
	return one[0], err
}

func readChunk(r byteReader) ([]byte, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil || n > maxSnapKV {
		return nil, fmt.Errorf("%w: bad length", ErrBadSnapshot)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSnapshot, err)
	}
	return b, nil
}
