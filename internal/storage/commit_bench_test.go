package storage

import (
	"fmt"
	"math/rand"
	"testing"
)

// BenchmarkStateCommit measures what one applied write costs the state
// database (its Put, its request id, the shard's applied index, and its
// share of the transaction's commit) when a commit carries 1 to 128 of
// them, on 16 shards holding 10,000 keys of 1 KiB: the question whether
// committing the state at an interval, many applies per commit, would
// make writes much cheaper (docs/adr/020, steps 14 and 15). With random
// keys, as under YCSB and as versions are stored today (under their key),
// each write dirties a leaf of its own and the commit's cost stays mostly
// per write. The commit-order runs store each new version under a key
// that grows with every write, as a layout keyed by revision would (the
// in-memory index from key to revision such a layout needs is not
// counted): the writes of a commit then share the last leaf.
func BenchmarkStateCommit(b *testing.B) {
	for _, layout := range []string{"random", "commit-order"} {
		for _, per := range []int{1, 2, 8, 32, 128} {
			b.Run(fmt.Sprintf("keys-%s/writes-per-commit-%d", layout, per), func(b *testing.B) {
				benchStateCommit(b, layout == "commit-order", per)
			})
		}
	}
}

func benchStateCommit(b *testing.B, commitOrder bool, per int) {
	cfg := testConfig(b)
	cfg.Derived = true
	db := openDB(b, cfg)
	const shards, keys = 16, 10000
	val := make([]byte, 1024)
	key := func(i int) []byte { return []byte(fmt.Sprintf("user%012d", i*7919%keys)) }
	hlc := uint64(1)
	// write stores a new version of key i and returns its shard.
	write := func(tx *Tx, i int) (*ShardTx, error) {
		s, err := tx.Shard(ShardID{Keyspace: "default", Shard: uint32(i % shards)})
		if err != nil {
			return nil, err
		}
		hlc++
		k := key(i)
		if commitOrder {
			k = []byte(fmt.Sprintf("rev%016d", hlc))
		}
		return s, s.Put(Record{Key: k, Version: ver(hlc, "s1"), Value: val})
	}
	if err := db.UpdateAlone(func(tx *Tx) error {
		for i := 0; i < keys; i++ {
			if _, err := write(tx, i); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	r := rand.New(rand.NewSource(1))
	b.SetBytes(int64(len(val)))
	b.ResetTimer()
	for n := 0; n < b.N; n += per {
		err := db.UpdateAlone(func(tx *Tx) error {
			for j := 0; j < per; j++ {
				s, err := write(tx, r.Intn(keys))
				if err != nil {
					return err
				}
				if err := s.PutRequest("client", hlc, hlc, nil); err != nil {
					return err
				}
				if err := s.SetApplied(hlc, hlc); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}
