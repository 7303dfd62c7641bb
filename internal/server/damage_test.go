package server

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/wal"
)

// TestDamagedLogIsRefused: a node whose write-ahead log was damaged in
// the middle (bytes flipped early in the segment, valid records after
// them) refuses to start, with an error naming the segment file and the
// offset and pointing at the recovery procedure, instead of cutting the
// log there and serving a subset of its acknowledged writes. With a new
// boot id the state database would be rebuilt from that log, as after a
// machine restart.
func TestDamagedLogIsRefused(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := 0; i < 300; i++ {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	n.srv.Stop()

	segs, err := filepath.Glob(filepath.Join(dir, walDir, "*.wal"))
	if err != nil || len(segs) != 1 {
		t.Fatalf("segments: %v, %v", segs, err)
	}
	raw, err := os.ReadFile(segs[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, at := range []int{100, 2_000, 10_000} {
		t.Run(fmt.Sprint("offset ", at), func(t *testing.T) {
			crash := t.TempDir()
			copyDir(t, dir, crash)
			b := append([]byte(nil), raw...)
			for k := range 4 {
				b[at+k] ^= 0x5A
			}
			seg := filepath.Join(crash, walDir, filepath.Base(segs[0]))
			if err := os.WriteFile(seg, b, 0o600); err != nil {
				t.Fatal(err)
			}
			rebooted := testConfig(crash)
			rebooted.Shards, rebooted.BootID = 2, "boot-2"
			srv, err := New(rebooted, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			err = srv.Start()
			if err == nil {
				srv.Stop()
				t.Fatal("the node started on a damaged log")
			}
			msg := err.Error()
			if !errors.Is(err, wal.ErrCorrupt) || !strings.Contains(msg, seg) || !strings.Contains(msg, "at offset ") ||
				!strings.Contains(msg, "docs/operations.md") {
				t.Fatalf("start on a damaged log: %v", err)
			}
			t.Logf("refused: %v", err)
		})
	}
	// The undamaged directory still starts, with every key.
	cfg.BootID = "boot-2"
	n2 := start(t, cfg)
	for i := 0; i < 300; i++ {
		if g := n2.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("k%03d: %v", i, g)
		}
	}
}

// TestDamagedStateIsRebuilt: a node whose state database was damaged
// while it was stopped (page headers overwritten past the meta pages: a
// disk fault) starts, with the damaged file moved aside to
// state.db.damaged, shard state rebuilt from the raft snapshots and
// logs, and every acknowledged write readable. bbolt alone panics on such
// a file (TestOpenDamagedPages, internal/storage).
func TestDamagedStateIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	for i := 0; i < 300; i++ {
		n.put(t, fmt.Sprintf("k%03d", i), fmt.Sprint("v", i))
	}
	n.srv.Stop()

	path := filepath.Join(dir, stateFile)
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const page = 4096
	for p := 2; p < min(len(b)/page, 4096); p++ {
		for i := range 16 {
			b[p*page+i] = 0xA5
		}
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n2 := start(t, cfg) // same boot: a process restart
	for i := 0; i < 300; i++ {
		if g := n2.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != fmt.Sprint("v", i) {
			t.Fatalf("k%03d after the rebuild: %v", i, g)
		}
	}
	if _, err := os.Stat(path + damagedSuffix); err != nil {
		t.Fatalf("the damaged state database was not kept aside: %v", err)
	}
}

// TestDamagedClusterFileIsRelearned: cluster.json keeps a copy of the
// cluster configuration for when its group is out of reach. A copy that
// does not decode is moved aside and the configuration, keyspaces
// included, is learnt again from the group's log and snapshots.
func TestDamagedClusterFileIsRelearned(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	conn, err := grpc.NewClient(n.srv.ClientAddr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := adminv1.NewGeoClient(conn).CreateKeyspace(ctx(t), &adminv1.CreateKeyspaceRequest{Name: "orders", Shards: 2, Sites: []string{cfg.Site}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "keyspace orders is served", func() bool {
		_, err := n.kv.Put(ctx(t), &kvv1.PutRequest{Header: &kvv1.RequestHeader{Keyspace: "orders"}, Key: []byte("o1"), Value: []byte("paid")})
		return err == nil
	})
	n.srv.Stop()

	path := filepath.Join(dir, clusterFile)
	if err := os.WriteFile(path, []byte(`{"sites": {"local": garbage`), 0o600); err != nil {
		t.Fatal(err)
	}
	n2 := start(t, cfg)
	waitFor(t, 20*time.Second, "keyspace orders is served again", func() bool {
		g, err := n2.kv.Get(ctx(t), &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "orders"}, Key: []byte("o1"), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
		return err == nil && string(g.Value) == "paid"
	})
	if _, err := os.Stat(path + damagedSuffix); err != nil {
		t.Fatalf("the damaged cluster file was not kept aside: %v", err)
	}
}
