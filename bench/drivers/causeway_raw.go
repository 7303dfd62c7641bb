package drivers

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/bench/core"
)

// causewayRawSystem is the diagnostic mode causeway-causal-raw: Causeway's
// gRPC API called directly, as kvbench does, with CAUSAL reads and no
// session token, request id or client retries. It measures what the Go
// client's causal session (a token of up to 64 key floors sent with every
// request and returned with every reply) costs; it is not a configuration
// an application would use, since without the session it has no causal
// guarantees across requests.
type causewayRawSystem struct{ pool *core.Pool }

func openCausewayRaw(cfg Config) (System, error) {
	p, err := core.Dial(cfg.Endpoints, cfg.Clients, cfg.ClientsPerConn)
	if err != nil {
		return nil, fmt.Errorf("drivers: causeway raw: %w", err)
	}
	return &causewayRawSystem{pool: p}, nil
}

func (s *causewayRawSystem) Mode() string { return ModeCausewayRaw }

func (s *causewayRawSystem) Driver(i int) (Driver, error) {
	return &causewayRawDriver{kv: s.pool.KV(i)}, nil
}

func (s *causewayRawSystem) Close() error { return s.pool.Close() }

type causewayRawDriver struct{ kv kvv1.KVClient }

const rawCausal = kvv1.Consistency_CONSISTENCY_CAUSAL

func (d *causewayRawDriver) Read(ctx context.Context, key string) ([]byte, error) {
	resp, err := d.kv.Get(ctx, &kvv1.GetRequest{Key: []byte(key), Consistency: rawCausal})
	if err != nil {
		return nil, err
	}
	if !resp.GetFound() {
		return nil, ErrNotFound
	}
	return resp.GetValue(), nil
}

func (d *causewayRawDriver) Update(ctx context.Context, key string, value []byte) error {
	_, err := d.kv.Put(ctx, &kvv1.PutRequest{Key: []byte(key), Value: value})
	return err
}

func (d *causewayRawDriver) Insert(ctx context.Context, key string, value []byte) error {
	return d.Update(ctx, key, value)
}

func (d *causewayRawDriver) Scan(ctx context.Context, startKey string, n int) (int, error) {
	resp, err := d.kv.Scan(ctx, &kvv1.ScanRequest{Start: []byte(startKey), Limit: uint32(n), Consistency: rawCausal})
	if err != nil {
		return 0, err
	}
	return len(resp.GetItems()), nil
}

func (d *causewayRawDriver) ReadModifyWrite(ctx context.Context, key string, value []byte) error {
	k := []byte(key)
	for attempt := 1; ; attempt++ {
		resp, err := d.kv.Get(ctx, &kvv1.GetRequest{Key: k, Consistency: rawCausal})
		if err != nil {
			return err
		}
		req := &kvv1.CompareAndSwapRequest{Key: k, Value: value}
		if resp.GetFound() {
			req.Expect = &kvv1.CompareAndSwapRequest_ExpectedVersion{ExpectedVersion: resp.GetVersion()}
		} else {
			req.Expect = &kvv1.CompareAndSwapRequest_ExpectAbsent{ExpectAbsent: true}
		}
		_, err = d.kv.CompareAndSwap(ctx, req)
		switch status.Code(err) {
		case codes.OK:
			return nil
		case codes.FailedPrecondition, codes.AlreadyExists, codes.NotFound: // conflict
		default:
			return err
		}
		if attempt >= MaxRMWAttempts {
			return fmt.Errorf("%w: %v", ErrConflict, err)
		}
	}
}

// TxnRead is a GetTxn without a session.
func (d *causewayRawDriver) TxnRead(ctx context.Context, keys []string) error {
	bk := make([][]byte, len(keys))
	for i, k := range keys {
		bk[i] = []byte(k)
	}
	_, err := d.kv.GetTxn(ctx, &kvv1.GetTxnRequest{Keys: bk})
	return err
}

func (d *causewayRawDriver) Close() error { return nil }
