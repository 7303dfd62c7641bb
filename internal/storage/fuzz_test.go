package storage

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// siteFrom turns arbitrary fuzz bytes into a valid site name.
func siteFrom(b []byte) string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789-"
	if len(b) > 63 {
		b = b[:63]
	}
	s := make([]byte, len(b))
	for i, c := range b {
		s[i] = alphabet[int(c)%len(alphabet)]
	}
	if len(s) == 0 {
		return "a"
	}
	return string(s)
}

// FuzzDecodeVersionKey: decodeVersionKey never panics on arbitrary bytes, and
// whatever it accepts re-encodes to exactly the same bytes.
func FuzzDecodeVersionKey(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x00})
	f.Add([]byte{0x00, 0x01})
	f.Add(encodeVersionKey([]byte("k"), ver(1, "a")))
	f.Add(encodeVersionKey([]byte("a\x00b"), ver(1<<40, "site-a")))
	f.Add(encodeVersionKey(nil, ver(0, "z")))
	f.Add([]byte("a\x00\xff\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\xff"))
	f.Fuzz(func(t *testing.T, enc []byte) {
		key, v, err := decodeVersionKey(enc)
		if err != nil {
			if !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("error %v is not ErrBadEncoding", err)
			}
			return
		}
		if re := encodeVersionKey(key, v); !bytes.Equal(re, enc) {
			t.Fatalf("decode(%x) = %q %+v, re-encodes to %x", enc, key, v, re)
		}
	})
}

// FuzzVersionKeyRoundTrip: encode then decode returns the key and version,
// and the encoding lies in [keyPrefix(key), keyBound(key)).
func FuzzVersionKeyRoundTrip(f *testing.F) {
	f.Add([]byte("k"), uint64(1), []byte("a"))
	f.Add([]byte{}, uint64(0), []byte("site-a"))
	f.Add([]byte{0x00, 0xFF, 0x00, 0x01}, ^uint64(0), []byte("zz"))
	f.Fuzz(func(t *testing.T, key []byte, hlc uint64, siteBytes []byte) {
		v := ver(hlc, siteFrom(siteBytes))
		enc := encodeVersionKey(key, v)
		gotKey, gotV, err := decodeVersionKey(enc)
		if err != nil {
			t.Fatalf("decode(encode(%q, %+v)): %v", key, v, err)
		}
		if !bytes.Equal(gotKey, key) || gotV != v {
			t.Fatalf("round trip of %q %+v gave %q %+v", key, v, gotKey, gotV)
		}
		if !bytes.HasPrefix(enc, keyPrefix(key)) || bytes.Compare(enc, keyBound(key)) >= 0 {
			t.Fatalf("encoding %x of %q outside [keyPrefix, keyBound)", enc, key)
		}
	})
}

// FuzzVersionKeyOrder: the bytewise order of two encodings is the (key
// ascending, version descending) order of what they encode.
func FuzzVersionKeyOrder(f *testing.F) {
	f.Add([]byte("a"), uint64(1), []byte("a"), []byte("a\x00"), uint64(1), []byte("a"))
	f.Add([]byte("k"), uint64(5), []byte("ab"), []byte("k"), uint64(5), []byte("a"))
	f.Add([]byte{}, uint64(0), []byte("z"), []byte{0x00}, ^uint64(0), []byte("a"))
	f.Fuzz(func(t *testing.T, k1 []byte, h1 uint64, s1 []byte, k2 []byte, h2 uint64, s2 []byte) {
		v1, v2 := ver(h1, siteFrom(s1)), ver(h2, siteFrom(s2))
		want := compareVersionKeys(k1, v1, k2, v2)
		if got := bytes.Compare(encodeVersionKey(k1, v1), encodeVersionKey(k2, v2)); got != want {
			t.Fatalf("compare(enc(%q, %+v), enc(%q, %+v)) = %d, want %d", k1, v1, k2, v2, got, want)
		}
	})
}

// FuzzDecodeLog: decodeLog never panics on arbitrary bytes; an entry it
// accepts re-encodes canonically and decodes back to itself.
func FuzzDecodeLog(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0x01})
	f.Add(encodeLog(&raft.Log{Term: 1, Type: raft.LogCommand, Data: []byte("x")}))
	f.Add(encodeLog(&raft.Log{Term: 3, Type: raft.LogConfiguration, Data: []byte("cfg"), Extensions: []byte("e"), AppendedAt: time.Unix(1700000000, 123)}))
	f.Add([]byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		var l raft.Log
		if err := decodeLog(b, 42, &l); err != nil {
			if !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("error %v is not ErrBadEncoding", err)
			}
			return
		}
		if l.Index != 42 {
			t.Fatalf("index %d, want 42", l.Index)
		}
		enc := encodeLog(&l)
		var l2 raft.Log
		if err := decodeLog(enc, 42, &l2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if !logsEqual(&l, &l2) {
			t.Fatalf("re-decoded log differs: %+v vs %+v", l, l2)
		}
		if !bytes.Equal(encodeLog(&l2), enc) {
			t.Fatal("encoding is not canonical")
		}
	})
}

// FuzzLogRoundTrip: encodeLog then decodeLog gives back every field.
func FuzzLogRoundTrip(f *testing.F) {
	f.Add(uint64(1), uint8(0), int64(0), []byte("data"), []byte{})
	f.Add(^uint64(0), uint8(255), int64(-1), []byte{}, []byte("ext"))
	f.Add(uint64(7), uint8(2), int64(1700000000123456789), []byte{0}, []byte{0xFF})
	f.Fuzz(func(t *testing.T, term uint64, typ uint8, at int64, data, ext []byte) {
		in := raft.Log{Index: 9, Term: term, Type: raft.LogType(typ), Data: data, Extensions: ext}
		if at != 0 {
			in.AppendedAt = time.Unix(0, at)
		}
		var out raft.Log
		if err := decodeLog(encodeLog(&in), 9, &out); err != nil {
			t.Fatal(err)
		}
		if !logsEqual(&in, &out) {
			t.Fatalf("round trip: %+v -> %+v", in, out)
		}
	})
}

// FuzzRestoreShard: RestoreShard on arbitrary bytes never panics, fails with
// ErrBadSnapshot unless the stream is a valid snapshot, and a failed restore
// leaves the shard's previous contents in place.
func FuzzRestoreShard(f *testing.F) {
	cfg := testConfig(f)
	db, err := Open(cfg, discardLogger(), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { _ = db.Close() })
	id := ShardID{Keyspace: "fz", Shard: 1}
	putRecords(f, db, id, Record{Key: []byte("k"), Version: ver(1, "a"), Value: []byte("v")})
	before := dumpShard(f, db, id)

	var snap bytes.Buffer
	src := ShardID{Keyspace: "src", Shard: 1}
	putRecords(f, db, src, Record{Key: []byte("x"), Version: ver(2, "b"), Value: []byte("y")})
	tx, err := db.BeginRead()
	if err != nil {
		f.Fatal(err)
	}
	if err := tx.WriteShardSnapshot(src, &snap); err != nil {
		f.Fatal(err)
	}
	_ = tx.Rollback()
	f.Add(snap.Bytes())
	f.Add([]byte("CWSNAP\x01\x00"))
	f.Add([]byte("CWSNAP\x01\x01\x01k\x01v\x00\x00\x00\x00\x00"))
	f.Add([]byte{})

	f.Fuzz(func(t *testing.T, stream []byte) {
		errFail := errors.New("roll back")
		var restoreErr error
		err := db.Update(func(tx *Tx) error {
			restoreErr = tx.RestoreShard(id, bytes.NewReader(stream))
			if restoreErr != nil {
				return restoreErr
			}
			return errFail // always roll back so every input sees the same shard
		})
		if restoreErr == nil {
			if !errors.Is(err, errFail) {
				t.Fatalf("Update: %v", err)
			}
			return
		}
		if !errors.Is(restoreErr, ErrBadSnapshot) {
			t.Fatalf("RestoreShard(%x) = %v, want ErrBadSnapshot", stream, restoreErr)
		}
		if after := dumpShard(t, db, id); after != before {
			t.Fatalf("failed restore changed the shard:\n%s\nwas\n%s", after, before)
		}
	})
}

func logsEqual(a, b *raft.Log) bool {
	return a.Index == b.Index && a.Term == b.Term && a.Type == b.Type &&
		bytes.Equal(a.Data, b.Data) && bytes.Equal(a.Extensions, b.Extensions) &&
		a.AppendedAt.Equal(b.AppendedAt) && a.AppendedAt.IsZero() == b.AppendedAt.IsZero()
}
