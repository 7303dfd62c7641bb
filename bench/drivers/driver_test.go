package drivers

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

func TestConns(t *testing.T) {
	for _, c := range []struct {
		clients, per, endpoints, want int
	}{
		{1, 0, 1, 1},
		{1, 0, 3, 3},
		{16, 0, 3, 3},
		{64, 0, 3, 9},
		{256, 0, 3, 33},
		{256, 1, 3, 256 + 2},
		{10, 4, 0, 3},
	} {
		cfg := Config{Clients: c.clients, ClientsPerConn: c.per, Endpoints: make([]string, c.endpoints)}
		if got := cfg.Conns(); got != c.want {
			t.Errorf("clients %d per %d endpoints %d: %d conns, want %d", c.clients, c.per, c.endpoints, got, c.want)
		}
	}
}

func TestRotated(t *testing.T) {
	eps := []string{"a", "b", "c"}
	for j, want := range [][]string{{"a", "b", "c"}, {"b", "c", "a"}, {"c", "a", "b"}, {"a", "b", "c"}} {
		if got := rotated(eps, j); !slices.Equal(got, want) {
			t.Errorf("rotated(%d) = %v, want %v", j, got, want)
		}
	}
	if !slices.Equal(eps, []string{"a", "b", "c"}) {
		t.Error("rotated modified its input")
	}
	if rotated(nil, 2) != nil {
		t.Error("rotated(nil)")
	}
}

func TestSystemOf(t *testing.T) {
	for mode, want := range map[string]string{ModeCausewayCausal: "causeway", ModeCausewayStrong: "causeway",
		ModeEtcdLin: "etcd", ModeEtcdSer: "etcd", ModeCausewayRaw: "causeway", ModeMemory: "memory"} {
		if got := SystemOf(mode); got != want {
			t.Errorf("SystemOf(%s) = %s", mode, got)
		}
	}
}

func TestOpenErrors(t *testing.T) {
	ctx := context.Background()
	if _, err := Open(ctx, Config{Mode: "mongo", Endpoints: []string{"x:1"}}); !errors.Is(err, ErrUnknownMode) {
		t.Errorf("unknown mode: %v", err)
	}
	if _, err := Open(ctx, Config{Mode: ModeEtcdLin}); err == nil {
		t.Error("etcd without endpoints accepted")
	}
	m := NewMemory()
	s, err := Open(ctx, Config{Mode: ModeMemory, Memory: m})
	if err != nil || s != System(m) {
		t.Errorf("memory: %v", err)
	}
}

// exercise runs every operation through d and checks the results; the key
// "k1" must not exist beforehand.
func exercise(t *testing.T, d Driver) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := d.Read(ctx, "drv-k1"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("read of a missing key: %v", err)
	}
	for _, k := range []string{"drv-k1", "drv-k2", "drv-k3", "drv-k4"} {
		if err := d.Insert(ctx, k, []byte("v-"+k)); err != nil {
			t.Fatalf("insert %s: %v", k, err)
		}
	}
	if v, err := d.Read(ctx, "drv-k2"); err != nil || string(v) != "v-drv-k2" {
		t.Fatalf("read: %q %v", v, err)
	}
	if err := d.Update(ctx, "drv-k2", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Read(ctx, "drv-k2"); err != nil || string(v) != "new" {
		t.Fatalf("read after update: %q %v", v, err)
	}
	if n, err := d.Scan(ctx, "drv-k2", 2); err != nil || n != 2 {
		t.Errorf("scan of 2 from drv-k2: %d %v", n, err)
	}
	if n, err := d.Scan(ctx, "drv-k1", 100); err != nil || n < 4 {
		t.Errorf("scan of 100 from drv-k1: %d %v", n, err)
	}
	if err := d.ReadModifyWrite(ctx, "drv-k3", []byte("rmw")); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Read(ctx, "drv-k3"); err != nil || string(v) != "rmw" {
		t.Fatalf("read after rmw: %q %v", v, err)
	}
	if err := d.ReadModifyWrite(ctx, "drv-absent", []byte("created")); err != nil {
		t.Fatalf("rmw of an absent key: %v", err)
	}
	if err := d.TxnRead(ctx, []string{"drv-k1", "drv-k4", "drv-missing"}); err != nil {
		t.Fatal(err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryDriver(t *testing.T) {
	m := NewMemory()
	d, _ := m.Driver(0)
	exercise(t, d)
	if m.RMWs.Load() != 2 || m.TxnReads.Load() != 1 || m.Scans.Load() != 2 {
		t.Errorf("counters %d %d %d", m.RMWs.Load(), m.TxnReads.Load(), m.Scans.Load())
	}
}

// TestMemoryConcurrentRMW: concurrent read-modify-writes never lose an
// update silently (each succeeds or reports ErrConflict).
func TestMemoryConcurrentRMW(t *testing.T) {
	m := NewMemory()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, _ := m.Driver(i)
			for range 200 {
				if err := d.ReadModifyWrite(context.Background(), "k", []byte{byte(i)}); err != nil && !errors.Is(err, ErrConflict) {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if _, ok := m.Get("k"); !ok {
		t.Error("no value")
	}
}

func TestMemoryInjection(t *testing.T) {
	m := NewMemory()
	m.FailEvery = 2
	d, _ := m.Driver(0)
	ctx := context.Background()
	if err := d.Update(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	if err := d.Update(ctx, "a", nil); !errors.Is(err, ErrInjected) {
		t.Fatalf("second call: %v", err)
	}
	m.FailEvery, m.Delay = 0, time.Hour
	cctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := d.Read(cctx, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("delay not bounded by the context: %v", err)
	}
}
