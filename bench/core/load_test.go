package core

import (
	"bytes"
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// store is a map that fails every failEvery-th insert.
type store struct {
	mu        sync.Mutex
	m         map[int64]int // record -> inserting worker
	calls     int64
	failEvery int64
}

var errInjected = errors.New("injected")

func (s *store) inserter(worker int) (Inserter, error) {
	return func(ctx context.Context, n int64) error {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.calls++; s.failEvery > 0 && s.calls%s.failEvery == 0 {
			return errInjected
		}
		if _, dup := s.m[n]; dup {
			return errors.New("inserted twice")
		}
		s.m[n] = worker
		return nil
	}, nil
}

func TestLoadInsertsEveryRecordOnce(t *testing.T) {
	s := &store{m: map[int64]int{}}
	var buf bytes.Buffer
	made := map[int]bool{}
	res, err := Load(context.Background(), LoadSpec{Label: "memory", Records: 500, Concurrency: 7, Progress: &buf, ProgressEvery: time.Millisecond},
		func(w int) (Inserter, error) {
			made[w] = true // called before any goroutine starts
			return s.inserter(w)
		})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.m) != 500 || res.Loaded != 500 || res.Latency.Count != 500 || res.Clients != 7 || res.Mode != "memory" || res.Retries != 0 {
		t.Fatalf("stored %d, result %+v", len(s.m), res)
	}
	if len(made) != 7 || !made[0] || !made[6] {
		t.Errorf("inserters made for workers %v, want 0..6", made)
	}
	// Fewer records than goroutines: one goroutine per record.
	res, err = Load(context.Background(), LoadSpec{Records: 3, Concurrency: 32}, (&store{m: map[int64]int{}}).inserter)
	if err != nil || res.Clients != 3 {
		t.Errorf("3 records: %d clients, %v", res.Clients, err)
	}
}

func TestLoadRetriesThenFails(t *testing.T) {
	s := &store{m: map[int64]int{}, failEvery: 3} // retries succeed
	res, err := Load(context.Background(), LoadSpec{Records: 60, Concurrency: 2}, s.inserter)
	if err != nil {
		t.Fatal(err)
	}
	if res.Retries == 0 || len(s.m) != 60 || res.Latency.Count != 60 {
		t.Errorf("retries %d, records %d, latencies %d", res.Retries, len(s.m), res.Latency.Count)
	}
	all := &store{m: map[int64]int{}, failEvery: 1} // everything fails
	if _, err := Load(context.Background(), LoadSpec{Records: 5, Attempts: 2}, all.inserter); !errors.Is(err, errInjected) {
		t.Errorf("err %v, want the injected failure", err)
	}
	if _, err := Load(context.Background(), LoadSpec{Records: 5}, func(int) (Inserter, error) { return nil, errInjected }); !errors.Is(err, errInjected) {
		t.Errorf("inserter error: %v", err)
	}
}
