package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/causeway-db/causeway/internal/causal"
)

// compareVersionKeys is the order the encoding must produce: user key
// ascending, then version descending (higher HLC first, then larger site).
func compareVersionKeys(k1 []byte, v1 causal.Version, k2 []byte, v2 causal.Version) int {
	if c := bytes.Compare(k1, k2); c != 0 {
		return c
	}
	return -v1.Compare(v2)
}

// Keys that stress the escaping: embedded and trailing 0x00, 0x01 (the
// terminator's second byte), 0x02 (keyBound's), 0xFF (the escape byte), and
// keys that are prefixes of each other.
var trickyKeys = [][]byte{
	{},
	{0x00},
	{0x00, 0x00},
	{0x00, 0x01},
	{0x00, 0x02},
	{0x00, 0xFF},
	{0x01},
	{0x02},
	{0xFF},
	{0xFF, 0x00},
	{0xFF, 0xFF},
	[]byte("a"),
	[]byte("a\x00"),
	[]byte("a\x00\x00"),
	[]byte("a\x00\x01"),
	[]byte("a\x00\xff"),
	[]byte("a\x01"),
	[]byte("a\x02"),
	[]byte("a\xff"),
	[]byte("ab"),
	[]byte("abc"),
	[]byte("b"),
	[]byte("user/42/profile"),
	bytes.Repeat([]byte{0x00}, 300),
	bytes.Repeat([]byte{0xFF}, 300),
	bytes.Repeat([]byte("x\x00"), 2000),
}

var trickySites = []string{"a", "a-", "a0", "ab", "abc", "b", "z", "zz", "0", "9", "-", "site-a", "site-b", strings.Repeat("z", 63)}

var trickyHLCs = []uint64{0, 1, 2, 255, 256, 1 << 32, math.MaxUint64 - 1, math.MaxUint64}

func TestVersionKeyRoundTrip(t *testing.T) {
	for _, key := range trickyKeys {
		for _, site := range trickySites {
			for _, hlc := range trickyHLCs {
				v := ver(hlc, site)
				enc := encodeVersionKey(key, v)
				gotKey, gotVer, err := decodeVersionKey(enc)
				if err != nil {
					t.Fatalf("decode(encode(%q, %v)) = %v", key, v, err)
				}
				if !bytes.Equal(gotKey, key) || gotVer != v {
					t.Fatalf("decode(encode(%q, %+v)) = %q, %+v", key, v, gotKey, gotVer)
				}
				if !bytes.HasPrefix(enc, keyPrefix(key)) {
					t.Fatalf("encode(%q) = %x lacks keyPrefix %x", key, enc, keyPrefix(key))
				}
				if bytes.Compare(enc, keyBound(key)) >= 0 {
					t.Fatalf("encode(%q) = %x not below keyBound %x", key, enc, keyBound(key))
				}
			}
		}
	}
}

// The decoded key must not alias the encoded buffer.
func TestDecodeVersionKeyCopies(t *testing.T) {
	enc := encodeVersionKey([]byte("abc"), ver(5, "s"))
	key, _, err := decodeVersionKey(enc)
	if err != nil {
		t.Fatal(err)
	}
	for i := range enc {
		enc[i] = 'X'
	}
	if string(key) != "abc" {
		t.Fatalf("decoded key changed with its source buffer: %q", key)
	}
}

func TestDecodeVersionKeyErrors(t *testing.T) {
	valid := encodeVersionKey([]byte("k"), ver(9, "s"))
	tests := []struct {
		name string
		enc  []byte
	}{
		{"nil", nil},
		{"empty", []byte{}},
		{"no terminator", []byte("abc")},
		{"dangling escape", []byte("ab\x00")},
		{"bad escape 0x00", []byte("a\x00\x00\x01" + strings.Repeat("\x00", 8) + "\xff")},
		{"bad escape 0x02", []byte("a\x00\x02" + strings.Repeat("\x00", 8) + "\xff")},
		{"terminator only", []byte{0x00, 0x01}},
		{"short hlc", []byte("k\x00\x01\x01\x02\x03\xff")},
		{"hlc without site terminator", []byte("k\x00\x01" + strings.Repeat("\x07", 8))},
		{"missing final 0xff", valid[:len(valid)-1]},
		{"final byte not 0xff", append(bytes.Clone(valid[:len(valid)-1]), 0xFE)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			key, v, err := decodeVersionKey(tc.enc)
			if !errors.Is(err, ErrBadEncoding) {
				t.Fatalf("decodeVersionKey(%x) = %q, %+v, %v; want ErrBadEncoding", tc.enc, key, v, err)
			}
		})
	}
}

// A key that is exactly the terminator and a 9-byte suffix decodes as the
// empty user key with the empty site: the shortest valid encoding.
func TestDecodeVersionKeyMinimal(t *testing.T) {
	enc := append([]byte{0x00, 0x01}, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xFF)
	key, v, err := decodeVersionKey(enc)
	if err != nil {
		t.Fatal(err)
	}
	if len(key) != 0 || v != ver(1, "") {
		t.Fatalf("got %q %+v", key, v)
	}
	if !bytes.Equal(encodeVersionKey(key, v), enc) {
		t.Fatalf("re-encoding differs")
	}
}

func randomKey(r *rand.Rand) []byte {
	alphabet := []byte{0x00, 0x01, 0x02, 'a', 'b', 0xFE, 0xFF}
	k := make([]byte, r.IntN(5))
	for i := range k {
		k[i] = alphabet[r.IntN(len(alphabet))]
	}
	return k
}

func randomHLC(r *rand.Rand) uint64 {
	switch r.IntN(4) {
	case 0:
		return trickyHLCs[r.IntN(len(trickyHLCs))]
	case 1:
		return r.Uint64()
	default:
		return uint64(r.IntN(4)) // many ties, to exercise the site order
	}
}

func randomSite(r *rand.Rand) string {
	return trickySites[r.IntN(len(trickySites))]
}

// TestVersionKeyOrder checks, for random (key, version) pairs, that the byte
// order of the encodings is user key ascending, then version descending.
func TestVersionKeyOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	type item struct {
		key []byte
		v   causal.Version
		enc []byte
	}
	items := make([]item, 400)
	for i := range items {
		items[i].key = randomKey(r)
		items[i].v = ver(randomHLC(r), randomSite(r))
		items[i].enc = encodeVersionKey(items[i].key, items[i].v)
	}
	for i := range items {
		for j := range items {
			a, b := items[i], items[j]
			want := compareVersionKeys(a.key, a.v, b.key, b.v)
			if got := bytes.Compare(a.enc, b.enc); got != want {
				t.Fatalf("compare(enc(%q, %+v), enc(%q, %+v)) = %d, want %d\n%x\n%x",
					a.key, a.v, b.key, b.v, got, want, a.enc, b.enc)
			}
		}
	}
	// Sorting the encodings must sort the pairs.
	sorted := slices.Clone(items)
	slices.SortFunc(sorted, func(a, b item) int { return bytes.Compare(a.enc, b.enc) })
	if !slices.IsSortedFunc(sorted, func(a, b item) int { return compareVersionKeys(a.key, a.v, b.key, b.v) }) {
		t.Fatal("encodings sorted bytewise are not in (key asc, version desc) order")
	}
}

// The site order at equal HLC, spelled out: the larger site (as a string)
// sorts first, including when one site is a prefix of the other.
func TestVersionKeySiteOrder(t *testing.T) {
	tests := []struct{ newer, older string }{
		{"b", "a"},
		{"ab", "a"},
		{"a-", "a"},
		{"a0", "a-"},
		{"z", "abc"},
		{"site-b", "site-a"},
		{"site-a1", "site-a"},
		{strings.Repeat("z", 63), strings.Repeat("z", 62)},
	}
	for _, tc := range tests {
		for _, hlc := range []uint64{0, 77, math.MaxUint64} {
			n := encodeVersionKey([]byte("k"), ver(hlc, tc.newer))
			o := encodeVersionKey([]byte("k"), ver(hlc, tc.older))
			if bytes.Compare(n, o) >= 0 {
				t.Errorf("hlc %d: site %q does not sort before site %q", hlc, tc.newer, tc.older)
			}
		}
	}
	// A higher HLC wins regardless of site.
	if bytes.Compare(encodeVersionKey([]byte("k"), ver(2, "a")), encodeVersionKey([]byte("k"), ver(1, "zzz"))) >= 0 {
		t.Error("higher hlc does not sort first")
	}
}

// keyPrefix/keyBound must bracket exactly the versions of one key.
func TestKeyPrefixBound(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, k := range trickyKeys {
		prefix, bound := keyPrefix(k), keyBound(k)
		if bytes.Compare(prefix, bound) >= 0 {
			t.Fatalf("keyPrefix(%q) = %x >= keyBound %x", k, prefix, bound)
		}
		for _, other := range trickyKeys {
			for n := 0; n < 20; n++ {
				v := ver(randomHLC(r), randomSite(r))
				enc := encodeVersionKey(other, v)
				inside := bytes.Compare(enc, prefix) >= 0 && bytes.Compare(enc, bound) < 0
				same := bytes.Equal(k, other)
				if inside != same {
					t.Fatalf("key %q, version of %q (%+v): inside [keyPrefix, keyBound) = %v", k, other, v, inside)
				}
				if bytes.HasPrefix(enc, prefix) != same {
					t.Fatalf("key %q: HasPrefix(enc(%q), keyPrefix) = %v", k, other, !same)
				}
				// Other keys fall on the side their user key order says.
				if !same {
					less := bytes.Compare(other, k) < 0
					if less && bytes.Compare(enc, prefix) >= 0 {
						t.Fatalf("enc(%q) >= keyPrefix(%q)", other, k)
					}
					if !less && bytes.Compare(enc, bound) < 0 {
						t.Fatalf("enc(%q) < keyBound(%q)", other, k)
					}
				}
			}
		}
	}
	// The extreme versions of a key are inside the bracket too.
	for _, k := range trickyKeys {
		for _, v := range []causal.Version{ver(0, "-"), ver(math.MaxUint64, strings.Repeat("z", 63)), ver(0, strings.Repeat("0", 63))} {
			enc := encodeVersionKey(k, v)
			if bytes.Compare(enc, keyPrefix(k)) < 0 || bytes.Compare(enc, keyBound(k)) >= 0 {
				t.Fatalf("enc(%q, %+v) outside its own bracket", k, v)
			}
		}
	}
}

func TestValidSiteName(t *testing.T) {
	tests := []struct {
		site string
		ok   bool
	}{
		{"a", true},
		{"site-a", true},
		{"us-east-1", true},
		{"0", true},
		{"-", true},
		{strings.Repeat("a", 63), true},
		{"", false},
		{strings.Repeat("a", 64), false},
		{"Site", false},
		{"a_b", false},
		{"a.b", false},
		{"a b", false},
		{"a\x00", false},
		{"\xff", false},
		{"é", false},
		{"a/b", false},
	}
	for _, tc := range tests {
		if got := ValidSiteName(tc.site); got != tc.ok {
			t.Errorf("ValidSiteName(%q) = %v, want %v", tc.site, got, tc.ok)
		}
	}
}

// Every byte a valid site name can hold inverts to something other than
// 0xFF, which is what makes the site terminator unambiguous.
func TestValidSiteBytesNeverInvertTo0xFF(t *testing.T) {
	for c := 0; c < 256; c++ {
		if ValidSiteName(string([]byte{byte(c)})) && ^byte(c) == 0xFF {
			t.Fatalf("site byte %#x inverts to 0xFF", c)
		}
	}
}

func TestValueEncoding(t *testing.T) {
	tests := []struct {
		name      string
		value     []byte
		tombstone bool
		keysOnly  bool
		stamp     uint64
		wantValue []byte
	}{
		{"value", []byte("hello"), false, false, 0, []byte("hello")},
		{"empty value", []byte{}, false, false, 0, []byte{}},
		{"nil value", nil, false, false, 0, nil},
		{"binary value", []byte{0x00, 0x01, 0xFF}, false, false, 0, []byte{0x00, 0x01, 0xFF}},
		{"keys only", []byte("hello"), false, true, 0, nil},
		{"tombstone", nil, true, false, 0, nil},
		{"tombstone drops value", []byte("ignored"), true, false, 0, nil},
		{"tombstone keys only", nil, true, true, 0, nil},
		{"stamped value", []byte("hello"), false, false, 1 << 40, []byte("hello")},
		{"stamped tombstone", nil, true, false, 7, nil},
		{"stamped keys only", []byte("hello"), false, true, 9, nil},
	}
	ek := encodeVersionKey([]byte("key"), causal.Version{HLC: 42, Site: "s1"})
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			enc := encodeValue(ek, tc.value, tc.tombstone, tc.stamp)
			if tc.tombstone && tc.stamp == 0 && len(enc) != 1+sumLen {
				t.Errorf("tombstone encoding %x has a payload", enc)
			}
			val, tomb, stamp, err := decodeValue(ek, enc, tc.keysOnly)
			if err != nil {
				t.Fatal(err)
			}
			if tomb != tc.tombstone || !bytes.Equal(val, tc.wantValue) || stamp != tc.stamp {
				t.Fatalf("decode = %q, %v, %d; want %q, %v, %d", val, tomb, stamp, tc.wantValue, tc.tombstone, tc.stamp)
			}
			if tc.keysOnly && val != nil {
				t.Fatalf("keysOnly returned non-nil value %q", val)
			}
			if valueStamp(enc) != tc.stamp {
				t.Fatalf("valueStamp = %d, want %d", valueStamp(enc), tc.stamp)
			}
			// Every site holds the same canonical bytes, stamped or not,
			// and without the checksum (which covers the stamp).
			if want := storedValue(encodeValue(ek, tc.value, tc.tombstone, 0)); !bytes.Equal(canonicalValue(enc), want) {
				t.Fatalf("canonical %x, want %x", canonicalValue(enc), want)
			}
			// A snapshot carries the value without its checksum; restored,
			// it is stored as before.
			if sealed, err := sealValue(ek, storedValue(enc)); err != nil || !bytes.Equal(sealed, enc) {
				t.Fatalf("sealValue(storedValue) = %x, %v; want %x", sealed, err, enc)
			}
			// Any changed byte, of the value or of its key, is caught.
			for i := range enc {
				bad := bytes.Clone(enc)
				bad[i] ^= 0x10
				if _, _, _, err := decodeValue(ek, bad, tc.keysOnly); !errors.Is(err, ErrDamaged) {
					t.Fatalf("byte %d of %x changed: err = %v, want ErrDamaged", i, enc, err)
				}
			}
			for i := range ek {
				bad := bytes.Clone(ek)
				bad[i] ^= 0x01
				if _, _, _, err := decodeValue(bad, enc, tc.keysOnly); !errors.Is(err, ErrDamaged) {
					t.Fatalf("byte %d of the key changed: err = %v, want ErrDamaged", i, err)
				}
			}
			// The value must be a copy.
			if len(val) > 0 {
				enc[len(enc)-1-sumLen] ^= 0xFF
				if !bytes.Equal(val, tc.wantValue) {
					t.Fatal("decoded value aliases the encoded buffer")
				}
			}
		})
	}
	for _, bad := range [][]byte{nil, {}, {flagStamp, 1, 2}, {0x80}, {0x80 | flagSum, 0, 0, 0, 0}} {
		if _, _, _, err := decodeValue(ek, bad, false); !errors.Is(err, ErrBadEncoding) && !errors.Is(err, ErrDamaged) {
			t.Fatalf("decodeValue(%x) err = %v, want ErrBadEncoding or ErrDamaged", bad, err)
		}
	}
	// Unknown flags under a valid checksum are a bad encoding.
	bad := []byte{0x80 | flagSum}
	bad = binary.BigEndian.AppendUint32(bad, valueSum(ek, bad))
	if _, _, _, err := decodeValue(ek, bad, false); !errors.Is(err, ErrBadEncoding) {
		t.Fatalf("unknown flags: err = %v, want ErrBadEncoding", err)
	}
}

func TestRequestKeyDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, hlc := range []uint64{0, 7, math.MaxUint64} {
		for _, c := range []string{"", "a", "ab", "client-1", "with\x00zero"} {
			for _, seq := range []uint64{0, 1, 256, math.MaxUint64} {
				k := requestKey(hlc, c, seq)
				id := fmt.Sprintf("%d/%q#%d", hlc, c, seq)
				if prev, ok := seen[string(k)]; ok {
					t.Fatalf("requestKey collision: %s and %s", prev, id)
				}
				seen[string(k)] = id
				h, client, sq, err := decodeRequestKey(k)
				if err != nil || h != hlc || string(client) != c || sq != seq {
					t.Fatalf("decodeRequestKey(requestKey(%s)) = %d %q %d %v", id, h, client, sq, err)
				}
			}
		}
	}
	// Records sort in commit order (by hlc), whatever their client.
	if bytes.Compare(requestKey(1, "zzz", 9), requestKey(2, "a", 1)) >= 0 {
		t.Fatal("request keys do not sort by hlc")
	}
	for _, bad := range [][]byte{nil, make([]byte, 16), append(make([]byte, 9), 1, 0, 0, 0, 0, 0, 0, 0, 0)} {
		if _, _, _, err := decodeRequestKey(bad); !errors.Is(err, ErrBadEncoding) {
			t.Fatalf("decodeRequestKey(%x) err = %v, want ErrBadEncoding", bad, err)
		}
	}
}

func TestShardIDString(t *testing.T) {
	id := ShardID{Keyspace: "users", Shard: 12}
	if got := id.String(); got != "users/12" {
		t.Fatalf("String() = %q", got)
	}
	if got := string(id.bucket()); got != "shard/users/12" {
		t.Fatalf("bucket() = %q", got)
	}
	if bytes.Equal((ShardID{"a", 1}).bucket(), (ShardID{"a", 10}).bucket()) {
		t.Fatal("distinct shards share a bucket")
	}
}
