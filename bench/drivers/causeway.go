package drivers

import (
	"context"
	"errors"
	"fmt"

	"github.com/causeway-db/causeway/client"
)

// causewaySystem is a pool of Causeway client library instances. Each is
// one gRPC connection (to the first of its endpoints, failing over to the
// others) and one causal session, shared by the client goroutines that use
// it.
type causewaySystem struct {
	mode    string
	clients []*client.Client
	read    []client.Option
}

func openCauseway(ctx context.Context, cfg Config) (System, error) {
	s := &causewaySystem{mode: cfg.Mode}
	switch cfg.Mode {
	case ModeCausewayCausal:
		s.read = []client.Option{client.WithConsistency(client.Causal)}
	case ModeCausewayStrong:
		s.read = []client.Option{client.WithConsistency(client.Strong)}
	}
	for j := range cfg.Conns() {
		cc := client.DefaultConfig()
		cc.Endpoints = rotated(cfg.Endpoints, j)
		cc.DialTimeout = cfg.DialTimeout
		cc.DisableCallStream = cfg.UnaryCalls
		if cfg.Keyspace != "" {
			cc.Keyspace = cfg.Keyspace
		}
		c, err := client.New(ctx, cc)
		if err != nil {
			s.Close()
			return nil, fmt.Errorf("drivers: causeway: %w", err)
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

func (s *causewaySystem) Mode() string { return s.mode }

func (s *causewaySystem) Driver(i int) (Driver, error) {
	return &causewayDriver{c: s.clients[i%len(s.clients)], read: s.read}, nil
}

func (s *causewaySystem) Close() error {
	var errs []error
	for _, c := range s.clients {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// causewayDriver writes with the default durability (LOCAL: the origin
// site's replica group committed and applied the write).
type causewayDriver struct {
	c    *client.Client
	read []client.Option
}

func (d *causewayDriver) Read(ctx context.Context, key string) ([]byte, error) {
	it, err := d.c.Get(ctx, []byte(key), d.read...)
	if err != nil {
		return nil, err
	}
	if !it.Found {
		return nil, ErrNotFound
	}
	return it.Value, nil
}

func (d *causewayDriver) Update(ctx context.Context, key string, value []byte) error {
	_, err := d.c.Put(ctx, []byte(key), value)
	return err
}

func (d *causewayDriver) Insert(ctx context.Context, key string, value []byte) error {
	_, err := d.c.Put(ctx, []byte(key), value)
	return err
}

func (d *causewayDriver) Scan(ctx context.Context, startKey string, n int) (int, error) {
	page, err := d.c.Scan(ctx, client.ScanOptions{Start: []byte(startKey), Limit: n}, d.read...)
	if err != nil {
		return 0, err
	}
	return len(page.Items), nil
}

// ReadModifyWrite reads the key with the mode's consistency, then
// compare-and-swaps on the version read (linearizable in the site). A CAUSAL
// read may return a version older than the leader's; the CAS then conflicts
// and the next attempt reads again.
func (d *causewayDriver) ReadModifyWrite(ctx context.Context, key string, value []byte) error {
	k := []byte(key)
	it, err := d.c.Get(ctx, k, d.read...)
	if err != nil {
		return err
	}
	expect := client.ExpectAbsent()
	if it.Found {
		expect = client.ExpectVersion(it.Version)
	}
	for attempt := 1; ; attempt++ {
		_, err := d.c.CompareAndSwap(ctx, k, expect, value)
		var conflict *client.ConflictError
		if !errors.As(err, &conflict) {
			return err
		}
		if attempt >= MaxRMWAttempts {
			return fmt.Errorf("%w: %v", ErrConflict, err)
		}
		// Re-read: the conflict names the current version, but a real
		// read-modify-write must see the value it modifies.
		it, err = d.c.Get(ctx, k, d.read...)
		if err != nil {
			return err
		}
		expect = client.ExpectAbsent()
		if it.Found {
			expect = client.ExpectVersion(it.Version)
		}
	}
}

// TxnRead is a GetTxn: one causally consistent snapshot of the keys
// (causal+ in both modes; GetTxn takes no consistency option), the read
// ChainReaction's transaction mixes measure.
func (d *causewayDriver) TxnRead(ctx context.Context, keys []string) error {
	bk := make([][]byte, len(keys))
	for i, k := range keys {
		bk[i] = []byte(k)
	}
	_, err := d.c.GetTxn(ctx, bk)
	return err
}

func (d *causewayDriver) Close() error { return nil }
