package ycsb

import (
	"iter"
	"strconv"
)

// KeyPrefix is the prefix of every record key, as in YCSB's CoreWorkload.
const KeyPrefix = "user"

const (
	fnvOffset64 = 0xCBF29CE484222325
	fnvPrime64  = 1099511628211
)

// FNV64 is YCSB's Utils.fnvhash64: FNV-1a over the eight little-endian
// bytes of n, with the result made non-negative as Java's Math.abs does
// (which leaves math.MinInt64 negative; YCSB inherits that, and so does
// KeyName). Both key names and the scrambled zipfian use it.
func FNV64(n int64) int64 {
	h := uint64(fnvOffset64)
	v := uint64(n)
	for range 8 {
		h ^= v & 0xff
		h *= fnvPrime64
		v >>= 8
	}
	s := int64(h)
	if s < 0 {
		s = -s // math.MinInt64 stays negative, as in Java
	}
	return s
}

// KeyName returns the key of record number n in YCSB's default hashed insert
// order (insertorder=hashed, zeropadding=1): "user" followed by the decimal
// FNV64(n). KeyName(0) is "user6284781860667377211", the same key YCSB
// writes first.
func KeyName(n int64) string {
	var buf [len(KeyPrefix) + 20]byte
	b := append(buf[:0], KeyPrefix...)
	b = strconv.AppendInt(b, FNV64(n), 10)
	return string(b)
}

// LoadKeys yields the record numbers 0..recordCount-1 and their keys in the
// order of YCSB's load phase. To split a load over clients, give each client
// a disjoint range of record numbers and call KeyName itself.
func LoadKeys(recordCount int64) iter.Seq2[int64, string] {
	return func(yield func(int64, string) bool) {
		for n := int64(0); n < recordCount; n++ {
			if !yield(n, KeyName(n)) {
				return
			}
		}
	}
}
