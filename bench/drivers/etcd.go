package drivers

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// etcdMaxRecvMsgBytes lets a scan of 1000 records of 64 KiB through.
const etcdMaxRecvMsgBytes = 128 << 20

// etcdSystem is a pool of etcd clientv3 instances; each is one gRPC
// connection balanced round-robin over its endpoints (clientv3's own
// behaviour), listed starting at a different endpoint per connection.
type etcdSystem struct {
	mode    string
	clients []*clientv3.Client
	read    []clientv3.OpOption // WithSerializable for etcd-ser
}

func openEtcd(ctx context.Context, cfg Config) (System, error) {
	s := &etcdSystem{mode: cfg.Mode}
	if cfg.Mode == ModeEtcdSer {
		s.read = []clientv3.OpOption{clientv3.WithSerializable()}
	}
	for j := range cfg.Conns() {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:          rotated(cfg.Endpoints, j),
			DialTimeout:        cfg.DialTimeout,
			MaxCallRecvMsgSize: etcdMaxRecvMsgBytes,
			Logger:             zap.NewNop(),
			Context:            context.WithoutCancel(ctx),
		})
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("drivers: etcd: %w", err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

func (s *etcdSystem) Mode() string { return s.mode }

func (s *etcdSystem) Driver(i int) (Driver, error) {
	return &etcdDriver{c: s.clients[i%len(s.clients)], read: s.read}, nil
}

func (s *etcdSystem) Close() error {
	var errs []error
	for _, c := range s.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

type etcdDriver struct {
	c    *clientv3.Client
	read []clientv3.OpOption
}

func (d *etcdDriver) Read(ctx context.Context, key string) ([]byte, error) {
	resp, err := d.c.Get(ctx, key, d.read...)
	if err != nil {
		return nil, err
	}
	if len(resp.Kvs) == 0 {
		return nil, ErrNotFound
	}
	return resp.Kvs[0].Value, nil
}

func (d *etcdDriver) Update(ctx context.Context, key string, value []byte) error {
	_, err := d.c.Put(ctx, key, string(value))
	return err
}

func (d *etcdDriver) Insert(ctx context.Context, key string, value []byte) error {
	_, err := d.c.Put(ctx, key, string(value))
	return err
}

func (d *etcdDriver) Scan(ctx context.Context, startKey string, n int) (int, error) {
	opts := append([]clientv3.OpOption{clientv3.WithFromKey(), clientv3.WithLimit(int64(n))}, d.read...)
	resp, err := d.c.Get(ctx, startKey, opts...)
	if err != nil {
		return 0, err
	}
	return len(resp.Kvs), nil
}

// ReadModifyWrite reads the key with the mode's consistency, then writes it
// in a transaction conditional on its mod revision being the one read (on
// its absence if it had none).
func (d *etcdDriver) ReadModifyWrite(ctx context.Context, key string, value []byte) error {
	val := string(value)
	for attempt := 1; ; attempt++ {
		resp, err := d.c.Get(ctx, key, d.read...)
		if err != nil {
			return err
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(key), "=", 0)
		if len(resp.Kvs) > 0 {
			cmp = clientv3.Compare(clientv3.ModRevision(key), "=", resp.Kvs[0].ModRevision)
		}
		tr, err := d.c.Txn(ctx).If(cmp).Then(clientv3.OpPut(key, val)).Commit()
		if err != nil {
			return err
		}
		if tr.Succeeded {
			return nil
		}
		if attempt >= MaxRMWAttempts {
			return ErrConflict
		}
	}
}

// TxnRead is a read-only transaction of Gets: linearizable for etcd-lin,
// served by the contacted member for etcd-ser (etcd serves a read-only
// transaction whose ranges are all serializable locally).
func (d *etcdDriver) TxnRead(ctx context.Context, keys []string) error {
	ops := make([]clientv3.Op, len(keys))
	for i, k := range keys {
		ops[i] = clientv3.OpGet(k, d.read...)
	}
	_, err := d.c.Txn(ctx).Then(ops...).Commit()
	return err
}

func (d *etcdDriver) Close() error { return nil }
