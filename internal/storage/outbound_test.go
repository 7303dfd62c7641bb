package storage

import (
	"bytes"
	"fmt"
	"testing"
)

// TestReadOutboundAfterTrimInTheSameTransaction: the applies of a shard
// and the shippers' reads share the open write transaction (deferred
// commits), where a trim that empties whole leaves of the outbound log
// leaves them empty until the commit. ReadOutbound of the origin whose
// entries precede such a leaf still finds its last entry (it panicked
// with "slice bounds out of range [3:0]", which stopped kvd, when the
// cursor's Prev stopped on the empty leaf).
func TestReadOutboundAfterTrimInTheSameTransaction(t *testing.T) {
	db := newDB(t)
	const n = 500
	update := bytes.Repeat([]byte("u"), 200)
	if err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		for _, origin := range []string{"s1", "s2"} {
			for seq := uint64(1); seq <= n; seq++ {
				if err := s.AppendOutbound(origin, seq, update); err != nil {
					return err
				}
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *Tx) error {
		s, err := tx.Shard(testShard)
		if err != nil {
			return err
		}
		if _, err := s.TrimOutbound("s2", n-100); err != nil {
			return err
		}
		for _, c := range []struct {
			origin            string
			from, first, last uint64
		}{{"s1", 1, 1, n}, {"s1", n - 3, 1, n}, {"s2", 1, n - 99, n}, {"s2", n, n - 99, n}} {
			es, first, last, err := s.ReadOutbound(c.origin, c.from, 10, 1<<20)
			if err != nil {
				return err
			}
			if first != c.first || last != c.last || len(es) == 0 || es[0].Seq != max(c.from, c.first) {
				return fmt.Errorf("ReadOutbound(%s, %d): %d entries, first %d, last %d; want entries from %d, first %d, last %d",
					c.origin, c.from, len(es), first, last, max(c.from, c.first), c.first, c.last)
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
