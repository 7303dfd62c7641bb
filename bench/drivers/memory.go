package drivers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// ErrInjected is the error of the operations Memory.FailEvery makes fail.
var ErrInjected = errors.New("drivers: injected failure")

// Memory is an in-process System (mode "memory"): a map behind a mutex,
// with optional latency and failure injection. It is meant for tests of the
// runner and dry runs of the command; Close keeps the data so that a load
// and several runs can share one Memory.
type Memory struct {
	// Delay, when positive, is slept before every operation.
	Delay time.Duration
	// FailEvery, when positive, makes every FailEvery-th operation (over all
	// drivers) fail with ErrInjected before touching the data.
	FailEvery int64

	calls atomic.Int64
	// Counts of executed operations by kind, for tests.
	Reads, Updates, Inserts, Scans, RMWs, TxnReads atomic.Int64

	mu   sync.Mutex
	data map[string]memRecord
}

type memRecord struct {
	value   []byte
	version uint64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{data: make(map[string]memRecord)} }

// Len returns the number of records.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.data)
}

// Get returns the value of key, for tests.
func (m *Memory) Get(key string) ([]byte, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	r, ok := m.data[key]
	return r.value, ok
}

// Mode implements System.
func (m *Memory) Mode() string { return ModeMemory }

// Driver implements System.
func (m *Memory) Driver(int) (Driver, error) { return memDriver{m}, nil }

// Close implements System; the data stays.
func (m *Memory) Close() error { return nil }

// enter applies the injected delay and failure.
func (m *Memory) enter(ctx context.Context) error {
	n := m.calls.Add(1)
	if m.Delay > 0 {
		t := time.NewTimer(m.Delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if m.FailEvery > 0 && n%m.FailEvery == 0 {
		return ErrInjected
	}
	return nil
}

func (m *Memory) put(key string, value []byte) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		m.data = make(map[string]memRecord)
	}
	r := m.data[key]
	m.data[key] = memRecord{value: slices.Clone(value), version: r.version + 1}
}

type memDriver struct{ m *Memory }

func (d memDriver) Read(ctx context.Context, key string) ([]byte, error) {
	d.m.Reads.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return nil, err
	}
	v, ok := d.m.Get(key)
	if !ok {
		return nil, ErrNotFound
	}
	return v, nil
}

func (d memDriver) Update(ctx context.Context, key string, value []byte) error {
	d.m.Updates.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return err
	}
	d.m.put(key, value)
	return nil
}

func (d memDriver) Insert(ctx context.Context, key string, value []byte) error {
	d.m.Inserts.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return err
	}
	d.m.put(key, value)
	return nil
}

func (d memDriver) Scan(ctx context.Context, startKey string, n int) (int, error) {
	d.m.Scans.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return 0, err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	var keys []string
	for k := range d.m.data {
		if k >= startKey {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return min(n, len(keys)), nil
}

func (d memDriver) ReadModifyWrite(ctx context.Context, key string, value []byte) error {
	d.m.RMWs.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return err
	}
	for range MaxRMWAttempts {
		d.m.mu.Lock()
		r := d.m.data[key]
		d.m.mu.Unlock()
		d.m.mu.Lock()
		if d.m.data[key].version == r.version {
			d.m.data[key] = memRecord{value: slices.Clone(value), version: r.version + 1}
			d.m.mu.Unlock()
			return nil
		}
		d.m.mu.Unlock()
	}
	return ErrConflict
}

func (d memDriver) TxnRead(ctx context.Context, keys []string) error {
	d.m.TxnReads.Add(1)
	if err := d.m.enter(ctx); err != nil {
		return err
	}
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	for _, k := range keys {
		_ = d.m.data[k]
	}
	return nil
}

func (d memDriver) Close() error { return nil }
