package storage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

// fillShard writes a mix of versions, tombstones, state and request ids.
func fillShard(t *testing.T, db *DB, id ShardID) {
	t.Helper()
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(id)
		if err != nil {
			return err
		}
		for _, r := range []Record{
			rec("", 1, "a", "empty key"),
			rec("key", 3, "s1", "v3"), // encoded key is 16 bytes long
			rec("key", 2, "s1", "v2"),
			tomb("key", 1, "s1"),
			rec("a\x00b", 5, "site-a", "nul in key"),
			rec("big", 9, "z", strings.Repeat("B", 3000)),
			rec("\xff\xff", 7, "a", "\x00\x01\x02"),
		} {
			if err := s.Put(r); err != nil {
				return err
			}
		}
		if err := s.SetApplied(42, 1<<50); err != nil {
			return err
		}
		if err := s.PutRequest("client-1", 7, 3, []byte("outcome")); err != nil {
			return err
		}
		return s.PutRequest("abcdefg", 1, 4, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// snapshot writes shard id of db as of a BeginRead transaction.
func snapshot(t *testing.T, db *DB, id ShardID) []byte {
	t.Helper()
	tx, err := db.BeginRead()
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := tx.Rollback(); err != nil {
			t.Errorf("Rollback: %v", err)
		}
	}()
	var buf bytes.Buffer
	if err := tx.WriteShardSnapshot(id, &buf); err != nil {
		t.Fatalf("WriteShardSnapshot: %v", err)
	}
	return buf.Bytes()
}

// restore restores stream into shard id inside db.Update. The reader is made
// inside the function, since Update may run it more than once.
func restore(db *DB, id ShardID, stream []byte) error {
	return db.Update(func(tx *Tx) error {
		return tx.RestoreShard(id, bytes.NewReader(stream))
	})
}

func TestSnapshotRoundTrip(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	fillShard(t, src, testShard)
	// Other shards of the source are not part of the snapshot.
	putRecords(t, src, ShardID{Keyspace: testShard.Keyspace, Shard: testShard.Shard + 1}, rec("other", 1, "a", "x"))

	// The target holds different data in the same shard, and another shard
	// that must be left alone.
	neighbour := ShardID{Keyspace: "neighbour", Shard: 1}
	putRecords(t, dst, testShard, rec("stale", 1, "a", "gone after restore"), rec("key", 99, "zz", "stale version"))
	err := dst.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.SetApplied(1000, 1000); err != nil {
			return err
		}
		return s.PutRequest("stale-client", 1, 1, []byte("stale"))
	})
	if err != nil {
		t.Fatal(err)
	}
	fillShard(t, dst, neighbour)
	neighbourBefore := dumpShard(t, dst, neighbour)

	stream := snapshot(t, src, testShard)
	if !bytes.HasPrefix(stream, []byte("CWSNAP\x02")) {
		t.Fatalf("stream starts with %q", stream[:min(7, len(stream))])
	}
	if err := restore(dst, testShard, stream); err != nil {
		t.Fatalf("RestoreShard: %v", err)
	}
	want, got := dumpShard(t, src, testShard), dumpShard(t, dst, testShard)
	if got != want {
		t.Fatalf("restored shard differs:\n got:\n%s\nwant:\n%s", got, want)
	}
	if after := dumpShard(t, dst, neighbour); after != neighbourBefore {
		t.Fatal("restore changed another shard")
	}
	// Spot-check through the API.
	view(t, dst, testShard, func(s *ShardTx) {
		if idx, hlc := s.Applied(); idx != 42 || hlc != 1<<50 {
			t.Errorf("Applied = %d %d", idx, hlc)
		}
		if out, ok, _ := s.Request("client-1", 7); !ok || string(out) != "outcome" {
			t.Errorf("Request = %q %v", out, ok)
		}
		if _, ok, _ := s.Request("stale-client", 1); ok {
			t.Error("stale request survived restore")
		}
		if _, ok, _ := s.Latest([]byte("stale"), false); ok {
			t.Error("stale key survived restore")
		}
		r, ok, err := s.Latest([]byte("key"), false)
		if err != nil || !ok || string(r.Value) != "v3" {
			t.Errorf("Latest(key) = %s %v %v", fmtRecord(r), ok, err)
		}
	})
	// A snapshot of the restored shard is byte-identical.
	if again := snapshot(t, dst, testShard); !bytes.Equal(again, stream) {
		t.Fatal("snapshot of the restored shard differs from the original stream")
	}
}

// A snapshot reflects its read transaction, not later writes.
func TestSnapshotIsolation(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	fillShard(t, src, testShard)
	before := dumpShard(t, src, testShard)
	tx, err := src.BeginRead()
	if err != nil {
		t.Fatal(err)
	}
	putRecords(t, src, testShard, rec("later", 100, "a", "after the snapshot began"))
	var buf bytes.Buffer
	werr := tx.WriteShardSnapshot(testShard, &buf)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	if werr != nil {
		t.Fatal(werr)
	}
	if err := restore(dst, testShard, buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	if got := dumpShard(t, dst, testShard); got != before {
		t.Fatalf("snapshot includes a later write:\n%s", got)
	}
}

// The snapshot of a shard that does not exist restores to an empty shard,
// replacing what was there.
func TestSnapshotOfMissingShard(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	stream := snapshot(t, src, testShard)
	fillShard(t, dst, testShard)
	if err := restore(dst, testShard, stream); err != nil {
		t.Fatal(err)
	}
	if got := allVersions(t, dst, testShard); len(got) != 0 {
		t.Fatalf("restored empty snapshot left %s", fmtRecords(got))
	}
	view(t, dst, testShard, func(s *ShardTx) {
		if idx, hlc := s.Applied(); idx != 0 || hlc != 0 {
			t.Errorf("Applied = %d %d", idx, hlc)
		}
		if _, ok, _ := s.Request("client-1", 7); ok {
			t.Error("request survived")
		}
	})
}

// Restoring into the same database (over the same shard) is a no-op.
func TestSnapshotRestoreOverItself(t *testing.T) {
	db := newDB(t)
	fillShard(t, db, testShard)
	before := dumpShard(t, db, testShard)
	if err := restore(db, testShard, snapshot(t, db, testShard)); err != nil {
		t.Fatal(err)
	}
	if got := dumpShard(t, db, testShard); got != before {
		t.Fatalf("restore over itself changed the shard:\n%s\nwas\n%s", got, before)
	}
}

// restoreTarget returns a database whose shard holds known contents.
func restoreTarget(t *testing.T) (*DB, string) {
	t.Helper()
	db := newDB(t)
	putRecords(t, db, testShard, rec("keep", 1, "a", "previous contents"), tomb("keep", 0, "a"))
	err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.SetApplied(5, 6); err != nil {
			return err
		}
		return s.PutRequest("prev", 1, 1, []byte("p"))
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, dumpShard(t, db, testShard)
}

func TestRestoreTruncated(t *testing.T) {
	src := newDB(t)
	fillShard(t, src, testShard)
	stream := snapshot(t, src, testShard)
	dst, before := restoreTarget(t)
	for n := 0; n < len(stream); n++ {
		err := restore(dst, testShard, stream[:n])
		if !errors.Is(err, ErrBadSnapshot) {
			t.Fatalf("stream truncated to %d of %d bytes: err = %v, want ErrBadSnapshot", n, len(stream), err)
		}
	}
	if got := dumpShard(t, dst, testShard); got != before {
		t.Fatalf("failed restores changed the shard:\n%s\nwas\n%s", got, before)
	}
}

// Trailing bytes after the checksum are not read; the stream is complete.
func TestRestoreIgnoresTrailingBytes(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	fillShard(t, src, testShard)
	stream := snapshot(t, src, testShard)
	if err := restore(dst, testShard, append(bytes.Clone(stream), "trailing"...)); err != nil {
		t.Fatal(err)
	}
	if dumpShard(t, dst, testShard) != dumpShard(t, src, testShard) {
		t.Fatal("restored shard differs")
	}
}

// flipTest restores every single-byte corruption of stream made by flip and
// checks that each fails with ErrBadSnapshot and leaves the shard intact.
func flipTest(t *testing.T, stream []byte, flips []byte) {
	dst, before := restoreTarget(t)
	var wrongClass []string
	for i := range stream {
		for _, f := range flips {
			bad := bytes.Clone(stream)
			bad[i] ^= f
			err := restore(dst, testShard, bad)
			if err == nil {
				t.Fatalf("byte %d ^ %#x: restore succeeded", i, f)
			}
			if !errors.Is(err, ErrBadSnapshot) {
				wrongClass = append(wrongClass, fmt.Sprintf("byte %d ^ %#x: %v", i, f, err))
			}
		}
	}
	if got := dumpShard(t, dst, testShard); got != before {
		t.Fatalf("failed restores changed the shard:\n%s\nwas\n%s", got, before)
	}
	if len(wrongClass) > 0 {
		t.Errorf("%d corruptions failed without ErrBadSnapshot, e.g.\n%s", len(wrongClass), strings.Join(wrongClass[:min(5, len(wrongClass))], "\n"))
	}
}

func TestRestoreFlippedByte(t *testing.T) {
	// A small shard keeps this exhaustive over every byte and bit.
	src := newDB(t)
	err := src.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if err := s.Put(rec("ab", 3, "s1", "v")); err != nil {
			return err
		}
		if err := s.Put(tomb("ab", 2, "s1")); err != nil {
			return err
		}
		if err := s.SetApplied(9, 10); err != nil {
			return err
		}
		return s.PutRequest("c1", 1, 2, []byte("o"))
	})
	if err != nil {
		t.Fatal(err)
	}
	stream := snapshot(t, src, testShard)
	flipTest(t, stream, []byte{0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40, 0x80, 0xFF})
}

// A damaged length that makes a key empty must be reported as a bad
// snapshot too. Here bit 4 of the length of the 16-byte data key of
// "key"@3/s1 is cleared: the key becomes empty, its first byte 'k' (107)
// reads as the value length, and the long value supplies enough bytes for
// that record to be stored before the checksum is checked.
func TestRestoreFlippedByteEmptyKey(t *testing.T) {
	src := newDB(t)
	putRecords(t, src, testShard, rec("key", 3, "s1", strings.Repeat("v", 300)))
	stream := snapshot(t, src, testShard)
	// "CWSNAP" 0x01, tag 0x01, klen 0x10.
	if stream[8] != 16 {
		t.Fatalf("unexpected layout: klen byte %#x", stream[8])
	}
	bad := bytes.Clone(stream)
	bad[8] ^= 0x10
	dst, before := restoreTarget(t)
	if err := restore(dst, testShard, bad); !errors.Is(err, ErrBadSnapshot) {
		t.Errorf("err = %v, want ErrBadSnapshot", err)
	}
	if got := dumpShard(t, dst, testShard); got != before {
		t.Fatal("failed restore changed the shard")
	}
}

func TestRestoreBadHeader(t *testing.T) {
	src := newDB(t)
	good := snapshot(t, src, testShard)
	tests := []struct {
		name   string
		stream []byte
	}{
		{"empty", nil},
		{"wrong magic", append([]byte("XWSNAP"), good[6:]...)},
		{"format 3", append([]byte("CWSNAP\x03"), good[7:]...)},
		{"format 0", append([]byte("CWSNAP\x00"), good[7:]...)},
		{"header only", []byte("CWSNAP\x02")},
		{"unknown tag", []byte("CWSNAP\x02\x05\x01k\x01v\x00\x00\x00\x00\x00")},
		{"huge length", []byte("CWSNAP\x02\x01\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01")},
		{"length over limit", append([]byte("CWSNAP\x02\x01"), 0x81, 0x80, 0x80, 0x20)}, // 64 MiB + 1
		{"no checksum", []byte("CWSNAP\x02\x00")},
		{"short checksum", []byte("CWSNAP\x02\x00\x01\x02")},
		{"wrong checksum", []byte("CWSNAP\x02\x00\x00\x00\x00\x00")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dst, before := restoreTarget(t)
			if err := restore(dst, testShard, tc.stream); !errors.Is(err, ErrBadSnapshot) {
				t.Fatalf("err = %v, want ErrBadSnapshot", err)
			}
			if got := dumpShard(t, dst, testShard); got != before {
				t.Fatal("failed restore changed the shard")
			}
		})
	}
}

type failingWriter struct {
	n   int // bytes accepted before failing
	err error
}

func (w *failingWriter) Write(p []byte) (int, error) {
	if len(p) <= w.n {
		w.n -= len(p)
		return len(p), nil
	}
	n := w.n
	w.n = 0
	return n, w.err
}

func TestWriteShardSnapshotWriterError(t *testing.T) {
	db := newDB(t)
	fillShard(t, db, testShard)
	full := snapshot(t, db, testShard)
	errDisk := errors.New("disk full")
	for _, n := range []int{0, 10, len(full) - 4, len(full) - 1} {
		tx, err := db.BeginRead()
		if err != nil {
			t.Fatal(err)
		}
		werr := tx.WriteShardSnapshot(testShard, &failingWriter{n: n, err: errDisk})
		_ = tx.Rollback()
		if !errors.Is(werr, errDisk) {
			t.Errorf("writer failing after %d bytes: err = %v, want errDisk", n, werr)
		}
	}
}

// A reader that returns data in tiny pieces works the same as a whole
// buffer.
func TestRestoreFromSlowReader(t *testing.T) {
	src, dst := newDB(t), newDB(t)
	fillShard(t, src, testShard)
	stream := snapshot(t, src, testShard)
	err := dst.Update(func(tx *Tx) error {
		return tx.RestoreShard(testShard, oneByteReader{bytes.NewReader(stream)})
	})
	if err != nil {
		t.Fatal(err)
	}
	if dumpShard(t, dst, testShard) != dumpShard(t, src, testShard) {
		t.Fatal("restored shard differs")
	}
}

type oneByteReader struct{ r io.Reader }

func (o oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

// A snapshot streamed straight from one database into another through a
// pipe, restored with UpdateAlone (the stream can be read only once).
func TestSnapshotStreamedWithUpdateAlone(t *testing.T) {
	src := newDB(t)
	dst, _ := restoreTarget(t)
	fillShard(t, src, testShard)
	pr, pw := io.Pipe()
	go func() {
		tx, err := src.BeginRead()
		if err != nil {
			pw.CloseWithError(err)
			return
		}
		err = tx.WriteShardSnapshot(testShard, pw)
		_ = tx.Rollback()
		pw.CloseWithError(err)
	}()
	err := dst.UpdateAlone(func(tx *Tx) error { return tx.RestoreShard(testShard, pr) })
	_ = pr.Close()
	if err != nil {
		t.Fatalf("restore from pipe: %v", err)
	}
	if got, want := dumpShard(t, dst, testShard), dumpShard(t, src, testShard); got != want {
		t.Fatalf("restored shard differs:\n%s\nwant\n%s", got, want)
	}
}

// A damaged stream restored with UpdateAlone also leaves the shard intact.
func TestRestoreDamagedWithUpdateAlone(t *testing.T) {
	src := newDB(t)
	fillShard(t, src, testShard)
	stream := snapshot(t, src, testShard)
	dst, before := restoreTarget(t)
	for _, bad := range [][]byte{
		stream[:len(stream)/2],
		stream[:len(stream)-1],
		func() []byte { b := bytes.Clone(stream); b[len(b)/2] ^= 0x01; return b }(),
	} {
		err := dst.UpdateAlone(func(tx *Tx) error { return tx.RestoreShard(testShard, bytes.NewReader(bad)) })
		if !errors.Is(err, ErrBadSnapshot) {
			t.Errorf("err = %v, want ErrBadSnapshot", err)
		}
	}
	if got := dumpShard(t, dst, testShard); got != before {
		t.Fatal("failed restore changed the shard")
	}
}
