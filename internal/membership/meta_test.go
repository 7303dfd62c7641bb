package membership

import (
	"bytes"
	"encoding/binary"
	"errors"
	"strings"
	"testing"

	"github.com/hashicorp/memberlist"
)

func validMeta() Meta {
	return Meta{Site: "eu-west", NodeID: "n1", ClientAddr: "10.0.0.1:7379", PeerAddr: "node1.eu.example.com:7381"}
}

func TestMetaRoundTrip(t *testing.T) {
	long := Meta{
		Site:       strings.Repeat("s", MaxNameLen),
		NodeID:     strings.Repeat("n", MaxNameLen),
		ClientAddr: strings.Repeat("c", MaxAddrLen-6) + ":65535",
		PeerAddr:   "[" + strings.Repeat("a", MaxAddrLen-4) + "]:1",
		// The largest meta carries an incarnation and an unreachable
		// count.
		Incarnation: 1 << 63,
		Unreachable: 255,
		Replicas:    7,
	}
	for _, m := range []Meta{
		validMeta(),
		{Site: "a", NodeID: "b", ClientAddr: "[::1]:1", PeerAddr: "127.0.0.1:65535"},
		long,
	} {
		b, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%+v): %v", m, err)
		}
		if len(b) > MaxMetaSize || len(b) > memberlist.MetaMaxSize {
			t.Fatalf("encoding of %+v is %d bytes; limits %d and %d", m, len(b), MaxMetaSize, memberlist.MetaMaxSize)
		}
		var got Meta
		if err := got.UnmarshalBinary(b); err != nil {
			t.Fatalf("UnmarshalBinary(MarshalBinary(%+v)): %v", m, err)
		}
		if got != m {
			t.Fatalf("round trip: got %+v, want %+v", got, m)
		}
	}
	b, _ := long.MarshalBinary()
	if len(b) != MaxMetaSize {
		t.Fatalf("largest meta encodes to %d bytes, MaxMetaSize is %d", len(b), MaxMetaSize)
	}
}

func TestMetaValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Meta)
	}{
		{"empty site", func(m *Meta) { m.Site = "" }},
		{"site too long", func(m *Meta) { m.Site = strings.Repeat("s", MaxNameLen+1) }},
		{"site uppercase", func(m *Meta) { m.Site = "EU" }},
		{"site with slash", func(m *Meta) { m.Site = "eu/west" }},
		{"empty node id", func(m *Meta) { m.NodeID = "" }},
		{"node id too long", func(m *Meta) { m.NodeID = strings.Repeat("n", MaxNameLen+1) }},
		{"node id with slash", func(m *Meta) { m.NodeID = "a/b" }},
		{"client addr too long", func(m *Meta) { m.ClientAddr = strings.Repeat("c", MaxAddrLen) + ":1" }},
		{"client addr without port", func(m *Meta) { m.ClientAddr = "10.0.0.1" }},
		{"client addr empty host", func(m *Meta) { m.ClientAddr = ":7379" }},
		{"client addr port 0", func(m *Meta) { m.ClientAddr = "10.0.0.1:0" }},
		{"client addr port too big", func(m *Meta) { m.ClientAddr = "10.0.0.1:65536" }},
		{"client addr named port", func(m *Meta) { m.ClientAddr = "10.0.0.1:http" }},
		{"peer addr empty", func(m *Meta) { m.PeerAddr = "" }},
		{"peer addr too long", func(m *Meta) { m.PeerAddr = strings.Repeat("p", 4096) + ":1" }},
		{"peer addr control char", func(m *Meta) { m.PeerAddr = "a\nb:1" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := validMeta()
			tc.edit(&m)
			if err := m.Validate(); !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("Validate(%+v) = %v, want ErrInvalidMeta", m, err)
			}
			if _, err := m.MarshalBinary(); !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("MarshalBinary(%+v) = %v, want ErrInvalidMeta", m, err)
			}
			cfg := DefaultConfig("127.0.0.1:7946", m)
			if err := cfg.Validate(); !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("Config.Validate with meta %+v = %v, want ErrInvalidMeta", m, err)
			}
		})
	}
}

// encodeFields builds an encoding by hand: version, then each field.
func encodeFields(version byte, fields ...string) []byte {
	b := []byte{version}
	for _, f := range fields {
		b = binary.AppendUvarint(b, uint64(len(f)))
		b = append(b, f...)
	}
	return b
}

func TestUnmarshalGarbage(t *testing.T) {
	good, _ := validMeta().MarshalBinary()
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"nil", nil, ErrMalformedMeta},
		{"empty", []byte{}, ErrMalformedMeta},
		{"version 0", append([]byte{0}, good[1:]...), ErrMalformedMeta},
		{"version only", []byte{1}, ErrMalformedMeta},
		{"truncated", good[:len(good)-1], ErrMalformedMeta},
		{"trailing byte", append(bytes.Clone(good), 0), ErrMalformedMeta},
		{"length past end", []byte{1, 5, 'a'}, ErrMalformedMeta},
		{"huge length", append([]byte{1}, binary.AppendUvarint(nil, 1<<62)...), ErrMalformedMeta},
		{"overlong varint", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, ErrMalformedMeta},
		{"site over limit", encodeFields(1, strings.Repeat("s", MaxNameLen+1), "n1", "a:1", "b:1"), ErrMalformedMeta},
		{"too big for memberlist", append(bytes.Clone(good), make([]byte, memberlist.MetaMaxSize)...), ErrMalformedMeta},
		{"non-minimal length", []byte{1, 0x82, 0x00, 'e', 'u'}, ErrMalformedMeta},
		{"json", []byte(`{"site":"eu","node":"n1"}`), ErrMalformedMeta},
		{"bad site chars", encodeFields(1, "EU", "n1", "a:1", "b:1"), ErrInvalidMeta},
		{"empty fields", encodeFields(1, "", "", "", ""), ErrInvalidMeta},
		{"bad addr", encodeFields(1, "eu", "n1", "nope", "b:1"), ErrInvalidMeta},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := Meta{Site: "untouched"}
			err := m.UnmarshalBinary(tc.in)
			if !errors.Is(err, tc.want) {
				t.Fatalf("UnmarshalBinary(%q) = %v, want %v", tc.in, err, tc.want)
			}
			if m != (Meta{Site: "untouched"}) {
				t.Fatalf("failed UnmarshalBinary modified the Meta: %+v", m)
			}
		})
	}
}

func TestUnmarshalNewerVersion(t *testing.T) {
	m := validMeta()
	m.Incarnation = 0x0102030405060708
	m.Unreachable = 2
	m.Replicas = 3
	b := encodeFields(5, m.Site, m.NodeID, m.ClientAddr, m.PeerAddr)
	b = append(b, 1, 2, 3, 4, 5, 6, 7, 8, 2, 3)
	b = append(b, encodeFields(0, "zone-a")[1:]...)
	var got Meta
	if err := got.UnmarshalBinary(b); err != nil {
		t.Fatalf("UnmarshalBinary(version 5): %v", err)
	}
	if got != m {
		t.Fatalf("got %+v, want %+v", got, m)
	}
}

// TestMetaUnreachable: a Meta with an incarnation and unreachable sites
// encodes as version 3 and decodes to itself; a node of the previous
// release reads it as its version-2 prefix; without an incarnation the
// count is not announced.
func TestMetaUnreachable(t *testing.T) {
	m := validMeta()
	m.Incarnation, m.Unreachable = 7, 2
	b, err := m.MarshalBinary()
	if err != nil || b[0] != metaVersionReach {
		t.Fatalf("MarshalBinary: version %d, %v", b[0], err)
	}
	var got Meta
	if err := got.UnmarshalBinary(b); err != nil || got != m {
		t.Fatalf("round trip: %+v, %v", got, err)
	}
	if err := got.UnmarshalBinary(b[:len(b)-1]); !errors.Is(err, ErrMalformedMeta) {
		t.Fatalf("version 3 without its count: %v", err)
	}
	m.Incarnation = 0
	b, _ = m.MarshalBinary()
	if b[0] != metaVersion {
		t.Fatalf("without an incarnation: version %d, want 1", b[0])
	}
}

// TestMetaIncarnation: a Meta with a site incarnation encodes as version
// 2 and decodes to itself; version 2 without exactly 8 bytes after the
// addresses, or with incarnation 0, is malformed; and without an
// incarnation the encoding stays version 1, byte for byte what nodes of
// older releases write and read.
func TestMetaIncarnation(t *testing.T) {
	m := validMeta()
	v1, err := m.MarshalBinary()
	if err != nil || v1[0] != 1 {
		t.Fatalf("without incarnation: version %d, %v", v1[0], err)
	}
	m.Incarnation = 0xfeedface
	b, err := m.MarshalBinary()
	if err != nil || b[0] != 2 || len(b) != len(v1)+8 {
		t.Fatalf("with incarnation: %x, %v", b, err)
	}
	var got Meta
	if err := got.UnmarshalBinary(b); err != nil || got != m {
		t.Fatalf("decoded %+v, %v; want %+v", got, err, m)
	}
	for _, bad := range [][]byte{b[:len(b)-1], append(append([]byte{}, b...), 0), append(append([]byte{}, b[:len(b)-8]...), 0, 0, 0, 0, 0, 0, 0, 0)} {
		if err := got.UnmarshalBinary(bad); !errors.Is(err, ErrMalformedMeta) {
			t.Fatalf("UnmarshalBinary(%x) = %v, want ErrMalformedMeta", bad, err)
		}
	}
}

// FuzzDecodeMeta checks that decoding arbitrary bytes never panics and that
// whatever decodes re-encodes to a Meta that decodes to itself.
func FuzzDecodeMeta(f *testing.F) {
	good, _ := validMeta().MarshalBinary()
	f.Add(good)
	f.Add([]byte{})
	f.Add([]byte{1})
	f.Add(encodeFields(2, "eu", "n1", "a:1", "b:2", "extra"))
	f.Add(encodeFields(1, "a", "b", "[::1]:1", "c:65535"))
	f.Add(append(bytes.Clone(good), 0))
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Meta
		if err := m.UnmarshalBinary(b); err != nil {
			if !errors.Is(err, ErrMalformedMeta) && !errors.Is(err, ErrInvalidMeta) {
				t.Fatalf("UnmarshalBinary error %v wraps neither ErrMalformedMeta nor ErrInvalidMeta", err)
			}
			return
		}
		if err := m.Validate(); err != nil {
			t.Fatalf("decoded meta %+v is invalid: %v", m, err)
		}
		enc, err := m.MarshalBinary()
		if err != nil {
			t.Fatalf("MarshalBinary(%+v): %v", m, err)
		}
		if len(enc) > MaxMetaSize {
			t.Fatalf("encoding is %d bytes, more than %d", len(enc), MaxMetaSize)
		}
		if b[0] == metaVersion && !bytes.Equal(enc, b) {
			t.Fatalf("version-1 encoding not canonical: decoded %q, re-encoded %q", b, enc)
		}
		var again Meta
		if err := again.UnmarshalBinary(enc); err != nil || again != m {
			t.Fatalf("round trip of %+v: got %+v, %v", m, again, err)
		}
	})
}
