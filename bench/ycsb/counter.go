package ycsb

import (
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
)

var (
	// ErrNotIssued is returned by Counter.Acknowledge for a record number
	// that NextInsert has not handed out.
	ErrNotIssued = errors.New("ycsb: record number not issued")
	// ErrAlreadyAcknowledged is returned by Counter.Acknowledge for a
	// record number acknowledged before.
	ErrAlreadyAcknowledged = errors.New("ycsb: record number already acknowledged")
)

// Counter hands out the record numbers of inserts and tracks which of them
// are done, like YCSB's AcknowledgedCounterGenerator: Limit is the highest
// record number below which every record is loaded or acknowledged, so
// reads (which never go above Limit) only ask for records that exist, even
// while inserts finish out of order. One Counter is shared by all the
// generators of a run; it is safe for concurrent use.
type Counter struct {
	start int64
	next  atomic.Int64 // the record number NextInsert hands out next
	limit atomic.Int64 // written only under mu

	mu struct {
		sync.Mutex
		// acked holds the acknowledged record numbers above limit+1,
		// waiting for the gap below them to close.
		acked map[int64]struct{}
	}
}

// NewCounter returns a counter for a run whose load phase wrote records
// 0..recordCount-1: the first insert gets recordCount, and Limit starts at
// recordCount-1.
func NewCounter(recordCount int64) *Counter {
	c := &Counter{start: recordCount}
	c.next.Store(recordCount)
	c.limit.Store(recordCount - 1)
	c.mu.acked = make(map[int64]struct{})
	return c
}

// Start returns the record count the counter was created with.
func (c *Counter) Start() int64 { return c.start }

// NextInsert returns the record number of a new insert.
func (c *Counter) NextInsert() int64 { return c.next.Add(1) - 1 }

// Issued returns the highest record number handed out by NextInsert, or
// Start()-1 if none.
func (c *Counter) Issued() int64 { return c.next.Load() - 1 }

// Limit returns the highest record number n such that records 0..n are all
// loaded or acknowledged.
func (c *Counter) Limit() int64 { return c.limit.Load() }

// Acknowledge records that the insert of record n has finished (whatever
// its outcome, as YCSB does) and advances Limit over every contiguously
// acknowledged record.
func (c *Counter) Acknowledge(n int64) error {
	if n < c.start || n >= c.next.Load() {
		return fmt.Errorf("%w: %d", ErrNotIssued, n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	limit := c.limit.Load()
	if _, dup := c.mu.acked[n]; dup || n <= limit {
		return fmt.Errorf("%w: %d", ErrAlreadyAcknowledged, n)
	}
	if n != limit+1 {
		c.mu.acked[n] = struct{}{}
		return nil
	}
	limit = n
	for {
		if _, ok := c.mu.acked[limit+1]; !ok {
			break
		}
		delete(c.mu.acked, limit+1)
		limit++
	}
	c.limit.Store(limit)
	return nil
}
