package ycsb

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

func TestCounterAcknowledgeOrder(t *testing.T) {
	// Records 0..9 are loaded; inserts 10, 11, 12, 13 are issued.
	for _, tc := range []struct {
		name   string
		acks   []int64
		limits []int64 // Limit after each ack
	}{
		{"in order", []int64{10, 11, 12, 13}, []int64{10, 11, 12, 13}},
		{"reversed", []int64{13, 12, 11, 10}, []int64{9, 9, 9, 13}},
		{"gap closes late", []int64{10, 12, 13, 11}, []int64{10, 10, 10, 13}},
		{"pairs", []int64{11, 10, 13, 12}, []int64{9, 11, 11, 13}},
		{"hole stays open", []int64{11, 12, 13}, []int64{9, 9, 9}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := NewCounter(10)
			if c.Limit() != 9 {
				t.Fatalf("initial Limit %d, want 9", c.Limit())
			}
			for want := int64(10); want <= 13; want++ {
				if got := c.NextInsert(); got != want {
					t.Fatalf("NextInsert = %d, want %d", got, want)
				}
			}
			for i, n := range tc.acks {
				if err := c.Acknowledge(n); err != nil {
					t.Fatalf("Acknowledge(%d): %v", n, err)
				}
				if got := c.Limit(); got != tc.limits[i] {
					t.Fatalf("after acks %v: Limit %d, want %d", tc.acks[:i+1], got, tc.limits[i])
				}
			}
		})
	}
}

func TestCounterAcknowledgeErrors(t *testing.T) {
	c := NewCounter(10)
	c.NextInsert() // 10
	c.NextInsert() // 11
	for _, tc := range []struct {
		n    int64
		want error
	}{
		{12, ErrNotIssued},
		{9, ErrNotIssued}, // loaded, not inserted
		{11, nil},
		{11, ErrAlreadyAcknowledged}, // pending
		{10, nil},
		{10, ErrAlreadyAcknowledged}, // below the limit
	} {
		if err := c.Acknowledge(tc.n); !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
			t.Errorf("Acknowledge(%d) = %v, want %v", tc.n, err, tc.want)
		}
	}
	if c.Limit() != 11 || c.Issued() != 11 {
		t.Errorf("Limit %d Issued %d, want 11 11", c.Limit(), c.Issued())
	}
}

// Property: after any sequence of acknowledgments, Limit is the largest L
// such that every record up to L is loaded or acknowledged.
func TestCounterLimitProperty(t *testing.T) {
	r := testRand(testSeed(t, 10))
	for trial := range 200 {
		start := int64(r.IntN(5))
		c := NewCounter(start)
		issued := 1 + r.IntN(300)
		for range issued {
			c.NextInsert()
		}
		order := r.Perm(issued)
		acked := make([]bool, issued)
		for i, j := range order {
			if err := c.Acknowledge(start + int64(j)); err != nil {
				t.Fatalf("trial %d: Acknowledge(%d): %v", trial, start+int64(j), err)
			}
			acked[j] = true
			want := start - 1
			for want+1-start < int64(issued) && acked[want+1-start] {
				want++
			}
			if got := c.Limit(); got != want {
				t.Fatalf("trial %d, after %d acks: Limit %d, want %d", trial, i+1, got, want)
			}
		}
		if c.Limit() != c.Issued() {
			t.Fatalf("trial %d: all acked, Limit %d != Issued %d", trial, c.Limit(), c.Issued())
		}
	}
}

// Many clients insert and acknowledge out of order while readers watch
// Limit; run with -race.
func TestCounterConcurrent(t *testing.T) {
	const clients, perClient = 8, 2000
	seed := testSeed(t, 11)
	c := NewCounter(100)
	var wg sync.WaitGroup
	done := make(chan struct{})
	var readerErr error
	var rwg sync.WaitGroup
	rwg.Add(1)
	go func() {
		defer rwg.Done()
		last := c.Limit()
		for {
			select {
			case <-done:
				return
			default:
			}
			l := c.Limit()
			if l < last || l > c.Issued() {
				readerErr = fmt.Errorf("Limit went from %d to %d (issued %d)", last, l, c.Issued())
				return
			}
			last = l
		}
	}()
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := testRand(seed + uint64(i))
			var pending []int64
			for range perClient {
				pending = append(pending, c.NextInsert())
				// Hold up to 4 inserts in flight, finishing a random one.
				for len(pending) > r.IntN(5) {
					j := r.IntN(len(pending))
					if err := c.Acknowledge(pending[j]); err != nil {
						t.Error(err)
						return
					}
					pending = append(pending[:j], pending[j+1:]...)
				}
			}
			for _, n := range pending {
				if err := c.Acknowledge(n); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	rwg.Wait()
	if readerErr != nil {
		t.Error(readerErr)
	}
	if want := int64(100 + clients*perClient - 1); c.Limit() != want || c.Issued() != want {
		t.Errorf("Limit %d Issued %d, want %d", c.Limit(), c.Issued(), want)
	}
}

func BenchmarkCounterInsertAcknowledge(b *testing.B) {
	c := NewCounter(0)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := c.Acknowledge(c.NextInsert()); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
