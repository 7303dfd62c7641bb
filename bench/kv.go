package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/bench/core"
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

// opConsistency maps each op to the consistency of its reads (unspecified
// for put).
var opConsistency = map[string]kvv1.Consistency{
	"put":  kvv1.Consistency_CONSISTENCY_UNSPECIFIED,
	"get":  kvv1.Consistency_CONSISTENCY_CAUSAL,
	"sget": kvv1.Consistency_CONSISTENCY_STRONG,
}

// kvClient is one client goroutine of a phase: a put writes a random value
// to a random key; a get or sget reads a random existing key with CAUSAL
// or STRONG consistency. No session token is sent, so a CAUSAL read has no
// causal floor and the contacted node's replica serves it. A missing key
// or a value of the wrong size is an error.
type kvClient struct {
	w     *KVWorkload
	kv    kvv1.KVClient
	rng   *rand.Rand
	put   bool
	cons  kvv1.Consistency
	key   []byte
	value []byte
}

func (c *kvClient) Next() int {
	c.key = c.w.AppendKey(c.key[:0], c.rng.IntN(c.w.Keys))
	if c.put {
		c.value = c.w.Value(c.rng)
	}
	return 0
}

func (c *kvClient) Do(ctx context.Context) error {
	if c.put {
		_, err := c.kv.Put(ctx, &kvv1.PutRequest{Header: c.w.header(), Key: c.key, Value: c.value})
		return err
	}
	resp, err := c.kv.Get(ctx, &kvv1.GetRequest{Header: c.w.header(), Key: c.key, Consistency: c.cons})
	switch {
	case err != nil:
		return err
	case !resp.Found:
		return core.KindError("not_found", fmt.Errorf("key %q not found", c.key))
	case len(resp.Value) != c.w.ValueSize:
		return core.KindError("bad_value", fmt.Errorf("key %q: value is %d bytes, want %d", c.key, len(resp.Value), c.w.ValueSize))
	}
	return nil
}

func (c *kvClient) Skip() {}

// Clients returns n client goroutines of op ("put", "get" or "sget") over
// pool; client i uses pool.KV(i) and a generator seeded with seed and i.
func (w *KVWorkload) Clients(pool *core.Pool, n int, op string, seed uint64) ([]core.Client, error) {
	cons, ok := opConsistency[op]
	if !ok {
		return nil, fmt.Errorf("workload: unknown op %q", op)
	}
	out := make([]core.Client, n)
	for i := range out {
		out[i] = &kvClient{w: w, kv: pool.KV(i), rng: rand.New(rand.NewPCG(seed, uint64(i)+1)), put: op == "put", cons: cons}
	}
	return out, nil
}

// Inserters returns the load phase's inserters over pool: worker i writes
// its records through pool.KV(i), each with a random value.
func (w *KVWorkload) Inserters(pool *core.Pool) func(worker int) (core.Inserter, error) {
	return func(worker int) (core.Inserter, error) {
		kv := pool.KV(worker)
		rng := rand.New(rand.NewPCG(uint64(worker), 0x6c6f6164))
		var key []byte
		return func(ctx context.Context, n int64) error {
			key = w.AppendKey(key[:0], int(n))
			_, err := kv.Put(ctx, &kvv1.PutRequest{Header: w.header(), Key: key, Value: w.Value(rng)})
			return err
		}, nil
	}
}
