package storage

import (
	"fmt"
	"testing"
)

// benchRequestShards fills 16 shards with n request records of 64 clients
// (hlc 1..n, in commit order) and returns the database.
func benchRequestShards(b *testing.B, n int) *DB {
	cfg := testConfig(b)
	cfg.Derived = true
	cfg.CommitInterval = 0
	db := openDB(b, cfg)
	if err := db.UpdateAlone(func(tx *Tx) error {
		for i := 1; i <= n; i++ {
			s, err := tx.Shard(ShardID{Keyspace: "default", Shard: uint32(i % 16)})
			if err != nil {
				return err
			}
			if err := s.PutRequest(fmt.Sprintf("%032x", i%64), uint64(i), uint64(i), []byte("outcome")); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		b.Fatal(err)
	}
	return db
}

// BenchmarkRequestWrites measures what recording the request ids of 32
// writes of 64 clients costs, in one transaction (about what one 20 ms
// commit of the state database holds under YCSB-A at 64 clients), after a
// retention window's worth of records (100,000 on 16 shards): the lookup
// every write with a request id makes and its record.
func BenchmarkRequestWrites(b *testing.B) {
	const n, per = 100000, 32
	db := benchRequestShards(b, n)
	next := uint64(n)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i += per {
		if err := db.UpdateAlone(func(tx *Tx) error {
			for j := 0; j < per; j++ {
				next++
				s, err := tx.Shard(ShardID{Keyspace: "default", Shard: uint32(next % 16)})
				if err != nil {
					return err
				}
				c := fmt.Sprintf("%032x", next%64)
				if _, ok, _ := s.Request(c, next); ok {
					return fmt.Errorf("seq %d already recorded", next)
				}
				if err := s.PutRequest(c, next, next, []byte("outcome")); err != nil {
					return err
				}
			}
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCollectRequests measures one garbage-collection pass over the
// request ids of a shard holding 100,000 of them, a tenth of them past the
// retention (as every GCInterval of 1 minute against a RequestRetention of
// 10 minutes under steady load).
func BenchmarkCollectRequests(b *testing.B) {
	const n = 100000
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		db := benchRequestShards(b, n)
		b.StartTimer()
		for sh := uint32(0); sh < 16; sh++ {
			if err := db.UpdateAlone(func(tx *Tx) error {
				s, err := tx.Shard(ShardID{Keyspace: "default", Shard: sh})
				if err != nil {
					return err
				}
				_, _, err = s.Collect(0, n/10, nil, 0)
				return err
			}); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		_ = db.Close()
		b.StartTimer()
	}
}
