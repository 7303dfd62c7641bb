package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// KVWorkload is a keyspace of Keys records of ValueSize random bytes,
// named Prefix followed by a zero-padded index.
type KVWorkload struct {
	Prefix    string
	Keys      int
	ValueSize int
	// Keyspace is sent in request headers; empty means the server default.
	Keyspace string

	values []byte // random bytes that values are sliced from
}

// valuePool is how many random bytes values are drawn from (plus
// ValueSize), so values differ without generating entropy per operation.
const valuePool = 1 << 20

// NewKVWorkload prepares the workload's random value pool.
func NewKVWorkload(prefix string, keys, valueSize int, seed uint64) (*KVWorkload, error) {
	if keys < 1 {
		return nil, errors.New("workload: keys must be positive")
	}
	if valueSize < 0 {
		return nil, errors.New("workload: value size must not be negative")
	}
	w := &KVWorkload{Prefix: prefix, Keys: keys, ValueSize: valueSize}
	rng := rand.New(rand.NewPCG(seed, 0x6b7662656e6368))
	w.values = make([]byte, valuePool+valueSize)
	for i := 0; i+8 <= len(w.values); i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			w.values[i+j] = byte(v >> (8 * j))
		}
	}
	return w, nil
}

// AppendKey appends the key of record i to dst.
func (w *KVWorkload) AppendKey(dst []byte, i int) []byte {
	dst = append(dst, w.Prefix...)
	const width = 10
	var num [20]byte
	digits := strconv.AppendInt(num[:0], int64(i), 10)
	for n := len(digits); n < width; n++ {
		dst = append(dst, '0')
	}
	return append(dst, digits...)
}

// Value returns a random value of ValueSize bytes. It aliases shared
// read-only memory: callers must not modify it.
func (w *KVWorkload) Value(rng *rand.Rand) []byte {
	off := rng.IntN(valuePool)
	return w.values[off : off+w.ValueSize : off+w.ValueSize]
}

func (w *KVWorkload) header() *kvv1.RequestHeader {
	if w.Keyspace == "" {
		return nil
	}
	return &kvv1.RequestHeader{Keyspace: w.Keyspace}
}

// PutOp returns, per client, an operation that writes a random value to a
// random key of the keyspace.
func (w *KVWorkload) PutOp(pool *Pool) func(client int) OpFunc {
	return func(client int) OpFunc {
		kv := pool.KV(client)
		var key []byte
		return func(ctx context.Context, rng *rand.Rand) error {
			key = w.AppendKey(key[:0], rng.IntN(w.Keys))
			_, err := kv.Put(ctx, &kvv1.PutRequest{Header: w.header(), Key: key, Value: w.Value(rng)})
			return err
		}
	}
}

// GetOp returns, per client, an operation that reads a random existing key
// with the given consistency (CAUSAL or STRONG). No session token is sent,
// so a CAUSAL read has no causal floor and the contacted node's replica
// serves it. A missing key or a value of the wrong size is an error.
func (w *KVWorkload) GetOp(pool *Pool, cons kvv1.Consistency) func(client int) OpFunc {
	return func(client int) OpFunc {
		kv := pool.KV(client)
		var key []byte
		return func(ctx context.Context, rng *rand.Rand) error {
			key = w.AppendKey(key[:0], rng.IntN(w.Keys))
			resp, err := kv.Get(ctx, &kvv1.GetRequest{Header: w.header(), Key: key, Consistency: cons})
			switch {
			case err != nil:
				return err
			case !resp.Found:
				return KindError("not_found", fmt.Errorf("key %q not found", key))
			case len(resp.Value) != w.ValueSize:
				return KindError("bad_value", fmt.Errorf("key %q: value is %d bytes, want %d", key, len(resp.Value), w.ValueSize))
			}
			return nil
		}
	}
}

// Load writes every record once with the given concurrency, retrying a
// failed write a few times. progress, when set, gets a line every 2s.
func (w *KVWorkload) Load(ctx context.Context, pool *Pool, concurrency int, progress io.Writer) error {
	concurrency = max(concurrency, 1)
	var next, done atomic.Int64
	var firstErr error
	var errOnce sync.Once
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for c := range concurrency {
		wg.Add(1)
		go func(c int) {
			defer wg.Done()
			kv := pool.KV(c)
			rng := rand.New(rand.NewPCG(uint64(c), 0x6c6f6164))
			var key []byte
			for {
				i := int(next.Add(1) - 1)
				if i >= w.Keys || ctx.Err() != nil {
					return
				}
				key = w.AppendKey(key[:0], i)
				var err error
				for attempt := 0; attempt < 5; attempt++ {
					opCtx, opCancel := context.WithTimeout(ctx, 10*time.Second)
					_, err = kv.Put(opCtx, &kvv1.PutRequest{Header: w.header(), Key: key, Value: w.Value(rng)})
					opCancel()
					if err == nil || ctx.Err() != nil {
						break
					}
					time.Sleep(time.Duration(attempt+1) * 50 * time.Millisecond)
				}
				if err != nil {
					errOnce.Do(func() { firstErr = fmt.Errorf("load key %q: %w", key, err); cancel() })
					return
				}
				done.Add(1)
			}
		}(c)
	}
	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	ticker := time.NewTicker(2 * time.Second)
	defer ticker.Stop()
	for {
		select {
		case <-finished:
			if firstErr != nil {
				return firstErr
			}
			return ctx.Err()
		case <-ticker.C:
			if progress != nil {
				fmt.Fprintf(progress, "  load: %d/%d records\n", done.Load(), w.Keys)
			}
		}
	}
}
