package drivers_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
	"github.com/causeway-db/causeway/bench/ycsbrun"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// startCauseway runs a one-node site in the test process (fast raft
// timings, no fsync) and returns its client address.
func startCauseway(t *testing.T) string {
	t.Helper()
	cfg := server.DefaultConfig()
	cfg.DataDir = t.TempDir()
	cfg.Site, cfg.NodeID = "test", "n1"
	cfg.ClientAddr, cfg.HTTPAddr, cfg.PeerAddr, cfg.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	cfg.GossipProfile = "local"
	cfg.Shards = 4
	cfg.NoSync = true
	cfg.Shard.HeartbeatTimeout = 100 * time.Millisecond
	cfg.Shard.ElectionTimeout = 100 * time.Millisecond
	cfg.Shard.LeaderLeaseTimeout = 50 * time.Millisecond
	cfg.Shard.CommitTimeout = 5 * time.Millisecond
	cfg.ShutdownGrace = 2 * time.Second
	srv, err := server.New(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	poll.Every(20*time.Millisecond).Until(t, 30*time.Second, "the node to be ready", srv.Ready)
	return srv.ClientAddr()
}

// freePorts returns two distinct loopback ports that were free a moment
// ago (both listeners are held until both are picked).
func freePorts(t *testing.T) (int, int) {
	t.Helper()
	var ports [2]int
	for i := range ports {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		ports[i] = l.Addr().(*net.TCPAddr).Port
	}
	return ports[0], ports[1]
}

// startEtcd runs a one-member etcd from PATH, or skips the test.
func startEtcd(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("etcd")
	if err != nil {
		t.Skip("etcd not on PATH (apt-get install etcd-server)")
	}
	dir := t.TempDir()
	cport, pport := freePorts(t)
	curl, purl := fmt.Sprintf("http://127.0.0.1:%d", cport), fmt.Sprintf("http://127.0.0.1:%d", pport)
	log, err := os.Create(filepath.Join(dir, "etcd.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "--name", "t1", "--data-dir", filepath.Join(dir, "data"),
		"--listen-client-urls", curl, "--advertise-client-urls", curl,
		"--listen-peer-urls", purl, "--initial-advertise-peer-urls", purl,
		"--initial-cluster", "t1="+purl, "--logger", "zap", "--log-outputs", "stderr")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		log.Close()
	})
	addr := fmt.Sprintf("127.0.0.1:%d", cport)
	err = poll.Every(100*time.Millisecond).Wait(20*time.Second, func() error {
		s, err := drivers.Open(context.Background(), drivers.Config{Mode: drivers.ModeEtcdLin, Endpoints: []string{addr}, Clients: 1, DialTimeout: time.Second})
		if err != nil {
			return err
		}
		defer s.Close()
		d, _ := s.Driver(0)
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if _, err := d.Read(ctx, "probe"); err != drivers.ErrNotFound {
			return fmt.Errorf("read of a missing key: %v", err)
		}
		return nil
	})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("etcd not serving: %v\n%s", err, b)
	}
	return addr
}

// exercise runs every operation of a driver of mode against addr, then a
// short workload A, E and F through the runner.
func exercise(t *testing.T, mode, addr string) {
	ctx := context.Background()
	s, err := drivers.Open(ctx, drivers.Config{Mode: mode, Endpoints: []string{addr}, Clients: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Mode() != mode {
		t.Errorf("mode %s", s.Mode())
	}
	d, err := s.Driver(0)
	if err != nil {
		t.Fatal(err)
	}
	key := func(s string) string { return mode + "/" + s }
	if _, err := d.Read(ctx, key("k1")); err != drivers.ErrNotFound {
		t.Fatalf("read of a missing key: %v", err)
	}
	for _, k := range []string{"k1", "k2", "k3", "k4"} {
		if err := d.Insert(ctx, key(k), []byte("v-"+k)); err != nil {
			t.Fatalf("insert %s: %v", k, err)
		}
	}
	if err := d.Update(ctx, key("k2"), []byte("new")); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Read(ctx, key("k2")); err != nil || string(v) != "new" {
		t.Fatalf("read after update: %q %v", v, err)
	}
	if n, err := d.Scan(ctx, key("k2"), 2); err != nil || n != 2 {
		t.Errorf("scan of 2: %d %v", n, err)
	}
	if err := d.ReadModifyWrite(ctx, key("k3"), []byte("rmw")); err != nil {
		t.Fatal(err)
	}
	if v, err := d.Read(ctx, key("k3")); err != nil || string(v) != "rmw" {
		t.Fatalf("read after rmw: %q %v", v, err)
	}
	if err := d.ReadModifyWrite(ctx, key("absent"), []byte("created")); err != nil {
		t.Fatalf("rmw of an absent key: %v", err)
	}
	if err := d.TxnRead(ctx, []string{key("k1"), key("k4"), key("missing")}); err != nil {
		t.Fatal(err)
	}

	if _, err := ycsbrun.Load(ctx, s, ycsbrun.LoadConfig{ValueSize: 100, LoadSpec: core.LoadSpec{Records: 200, Concurrency: 4, Timeout: 30 * time.Second}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"A", "E", "F", "txn-10-85-5"} {
		w, _ := ycsb.Lookup(name)
		w.RecordCount, w.FieldLength = 200, 100
		res, err := ycsbrun.Run(ctx, s, ycsbrun.RunConfig{Workload: w, Clients: 4, Seed: 1, PhaseSpec: core.PhaseSpec{Warmup: 50 * time.Millisecond, Duration: 300 * time.Millisecond}})
		if err != nil {
			t.Fatal(err)
		}
		// Conflicts of read-modify-writes racing on a hot key are
		// legitimate outcomes; nothing else is.
		if res.Ops == 0 || res.Errors-res.ErrorClasses["conflict"] != 0 {
			t.Errorf("%s: %d ops, %d errors %v %v", name, res.Ops, res.Errors, res.ErrorClasses, res.ErrorSamples)
		}
		t.Logf("%s %s: %.0f ops/s, p50 %.2f ms", mode, name, res.Throughput, res.Latency.P50Ms)
	}
}

func TestCausewayDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a server")
	}
	addr := startCauseway(t)
	for _, mode := range []string{drivers.ModeCausewayCausal, drivers.ModeCausewayStrong, drivers.ModeCausewayRaw} {
		t.Run(mode, func(t *testing.T) { exercise(t, mode, addr) })
	}
}

func TestEtcdDrivers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd")
	}
	addr := startEtcd(t)
	for _, mode := range []string{drivers.ModeEtcdLin, drivers.ModeEtcdSer} {
		t.Run(mode, func(t *testing.T) { exercise(t, mode, addr) })
	}
}
