package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
	"github.com/causeway-db/causeway/internal/wal"
)

// loggedNode runs a 2-shard node (boot "boot-1") that acknowledges 300
// puts, stops it, and returns its directory, configuration, WAL segment
// (one) and that segment's bytes.
func loggedNode(t *testing.T) (dir string, cfg Config, segs []string, raw []byte) {
	t.Helper()
	dir = t.TempDir()
	cfg = testConfig(dir)
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
	if raw, err = os.ReadFile(segs[0]); err != nil {
		t.Fatal(err)
	}
	return dir, cfg, segs, raw
}

// TestDamagedLogIsRefused: a node whose write-ahead log was damaged in
// the middle (bytes flipped early in the segment, valid records after
// them) refuses to start, with an error naming the segment file and the
// offset and pointing at the recovery procedure, instead of cutting the
// log there and serving a subset of its acknowledged writes. With a new
// boot id the state database would be rebuilt from that log, as after a
// machine restart.
func TestDamagedLogIsRefused(t *testing.T) {
	dir, cfg, segs, raw := loggedNode(t)
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
	damagePages(t, path)
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
//
// TestDamagedClusterFileIsRelearned: a cluster.json that does not decode,
// or whose checksum fails (a digit changed), is kept aside and the
// configuration learnt again.
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
	kept, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// A changed digit leaves valid JSON: the file's checksum finds it. A
	// shard count read as 3 would route keys to shards that do not hold
	// them ("not found" for stored keys).
	changed := bytes.Replace(kept, []byte(`"shards": 2`), []byte(`"shards": 3`), 1)
	if bytes.Equal(changed, kept) {
		t.Fatalf("no shard count of 2 in %s", kept)
	}
	for i, damage := range [][]byte{changed, []byte(`{"sites": {"local": garbage`)} {
		if err := os.WriteFile(path, damage, 0o600); err != nil {
			t.Fatal(err)
		}
		n2 := start(t, cfg)
		waitFor(t, 20*time.Second, "keyspace orders is served again", func() bool {
			g, err := n2.kv.Get(ctx(t), &kvv1.GetRequest{Header: &kvv1.RequestHeader{Keyspace: "orders"}, Key: []byte("o1"), Consistency: kvv1.Consistency_CONSISTENCY_STRONG})
			return err == nil && string(g.Value) == "paid"
		})
		aside, _ := filepath.Glob(path + damagedSuffix + "*")
		if len(aside) != i+1 {
			t.Fatalf("damage %d: the damaged cluster file was not kept aside: %v", i, aside)
		}
		n2.srv.Stop()
	}
}

// TestChangedStateValueIsRebuilt: a byte of a stored value changed in the
// state database while the node was stopped (bbolt's pages intact: only
// the versions' checksums can tell) is found when the node starts: the
// file is moved aside and shard state rebuilt, and every acknowledged
// write reads back as written. A second damage keeps the first file aside
// and moves the new one to a name of its own. With the state-checksum
// guard off the changed value is served.
func TestChangedStateValueIsRebuilt(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	value := func(i int) string { return fmt.Sprintf("value-%03d-%s", i, strings.Repeat("x", 100)) }
	for i := range 200 {
		n.put(t, fmt.Sprintf("k%03d", i), value(i))
	}
	n.srv.Stop()

	path := filepath.Join(dir, stateFile)
	damage := func(i int) {
		t.Helper()
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		needle := []byte(fmt.Sprintf("value-%03d-", i))
		if bytes.Count(b, needle) == 0 {
			t.Fatalf("%s is not in the state database", needle)
		}
		for at := 0; ; {
			j := bytes.Index(b[at:], needle)
			if j < 0 {
				break
			}
			b[at+j+len("value-")] ^= 0x01 // value-117- becomes value-017-
			at += j + len(needle)
		}
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	damage(117)
	n2 := start(t, cfg) // same boot: a process restart
	for i := range 200 {
		if g := n2.getStrong(t, fmt.Sprintf("k%03d", i)); string(g.Value) != value(i) {
			t.Fatalf("k%03d after the restart: %q, want %q", i, g.Value, value(i))
		}
	}
	first, err := os.ReadFile(path + damagedSuffix)
	if err != nil {
		t.Fatalf("the damaged state database was not kept aside: %v", err)
	}
	n2.srv.Stop()

	damage(42)
	n3 := start(t, cfg)
	if g := n3.getStrong(t, "k042"); string(g.Value) != value(42) {
		t.Fatalf("k042 after the second restart: %q", g.Value)
	}
	if again, err := os.ReadFile(path + damagedSuffix); err != nil || !bytes.Equal(again, first) {
		t.Fatalf("the first damaged file was replaced (%v)", err)
	}
	others, _ := filepath.Glob(path + damagedSuffix + "-*")
	if len(others) != 1 {
		t.Fatalf("second damaged file: %v", others)
	}
}

// TestDamagedValueReadStopsTheNode: a read that finds a stored version
// failing its checksum while the node runs fails (Unavailable: another
// replica can answer) instead of returning the changed value, and the
// node stops; its next start finds the damage, moves the file aside and
// rebuilds it.
func TestDamagedValueReadStopsTheNode(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards = 2
	cfg.BootID = "boot-1"
	n := start(t, cfg)
	ran := make(chan error, 1)
	go func() { ran <- n.srv.Run(context.Background()) }()
	n.put(t, "k", "hello")
	var damaged bool
	for _, g := range n.srv.Groups() {
		if storage.DamageValueForTest(n.srv.db, g.ID(), []byte("k")) == nil {
			damaged = true
		}
	}
	if !damaged {
		t.Fatal("k is in no shard of the node")
	}
	resp, err := n.kv.Get(ctx(t), &kvv1.GetRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unavailable {
		t.Fatalf("read of a damaged value: %q, %v; want Unavailable", resp.GetValue(), err)
	}
	select {
	case err = <-ran:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after a checksum failure")
	}
	if !errors.Is(err, storage.ErrDamaged) {
		t.Fatalf("Run returned %v; want the damaged state database", err)
	}
	t.Logf("Run: %v", err)
	n.srv.Stop()

	n2 := start(t, cfg)
	if g := n2.getStrong(t, "k"); string(g.Value) != "hello" {
		t.Fatalf("k after the restart: %q", g.Value)
	}
	if _, err := os.Stat(filepath.Join(dir, stateFile) + damagedSuffix); err != nil {
		t.Fatalf("the damaged state database was not kept aside: %v", err)
	}
}

// TestTruncatedLogIsRefused: the write-ahead log of a single node lost its
// last records while the node was stopped (the segment cut short, as a
// truncated copy or a lost file tail leaves it), and its state database,
// of the same boot, applied them. The node stops with an error naming the
// shard and the recovery procedure instead of numbering new writes over
// the lost ones (the state machine skipped those as applied, and they
// failed with "unexpected apply response"). Records zeroed at the end
// (which look like the log's preallocated space) are refused the same way.
// With the log-kept guard off the node serves on the zeroed log; the cut
// one is refused before, as the log is opened (guard wal-length).
func TestTruncatedLogIsRefused(t *testing.T) {
	dir, _, segs, raw := loggedNode(t)
	end := len(raw)
	for end > 0 && raw[end-1] == 0 {
		end--
	}
	for name, damage := range map[string]func(seg string) error{
		"cut":    func(seg string) error { return os.Truncate(seg, int64(end-4000)) },
		"zeroed": func(seg string) error { return zeroRange(seg, int64(end-4000), 4000) },
	} {
		t.Run(name, func(t *testing.T) {
			crash := t.TempDir()
			copyDir(t, dir, crash)
			if err := damage(filepath.Join(crash, walDir, filepath.Base(segs[0]))); err != nil {
				t.Fatal(err)
			}
			same := testConfig(crash)
			same.Shards, same.BootID = 2, "boot-1"
			srv, err := New(same, quietLogger())
			if err != nil {
				t.Fatal(err)
			}
			if err = srv.Start(); err == nil {
				ran := make(chan error, 1)
				go func() { ran <- srv.Run(context.Background()) }()
				select {
				case err = <-ran:
				case <-time.After(15 * time.Second):
					srv.Stop()
					t.Fatal("the node serves on a log that lost committed entries")
				}
			}
			// A cut file is refused as it is opened (its length is less
			// than the segment's preallocation, guard wal-length);
			// zeroed records only against the state database.
			want := shard.ErrLogLost
			if name == "cut" {
				want = wal.ErrCorrupt
			}
			if !errors.Is(err, want) || !strings.Contains(err.Error(), "docs/operations.md") {
				t.Fatalf("start on a log that lost entries: %v; want %v", err, want)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// zeroRange overwrites n bytes of the file at path with zeros, from off.
func zeroRange(path string, off int64, n int) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	if _, err := f.WriteAt(make([]byte, n), off); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// TestLostLogStaysRefused: a node whose write-ahead log is gone (wal/
// deleted, or its only segment emptied) refuses to start, naming raft.db
// and the log, and creates nothing in the log's place: started again (a
// supervisor restarts a node that exits 1) it refuses again, rather than
// run on a new empty log without its acknowledged writes (a single-node
// site then waited forever for a catalog leader; a node of a larger site
// rejoined under its id having lost the entries it had acknowledged).
func TestLostLogStaysRefused(t *testing.T) {
	dir, _, segs, _ := loggedNode(t)
	for _, c := range []struct {
		name   string
		damage func(t *testing.T, crash string)
		check  func(t *testing.T, crash string)
	}{
		{"wal deleted", func(t *testing.T, crash string) {
			if err := os.RemoveAll(filepath.Join(crash, walDir)); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, crash string) {
			if _, err := os.Stat(filepath.Join(crash, walDir)); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("a refused start created %s: %v", walDir, err)
			}
		}},
		{"only segment emptied", func(t *testing.T, crash string) {
			if err := os.WriteFile(filepath.Join(crash, walDir, filepath.Base(segs[0])), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, crash string) {
			got, err := filepath.Glob(filepath.Join(crash, walDir, "*.wal"))
			if err != nil || len(got) != 1 || filepath.Base(got[0]) != filepath.Base(segs[0]) {
				t.Fatalf("segments after a refused start: %v, %v", got, err)
			}
			if fi, err := os.Stat(got[0]); err != nil || fi.Size() != 0 {
				t.Fatalf("the emptied segment changed: %v, %v", fi, err)
			}
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			crash := t.TempDir()
			copyDir(t, dir, crash)
			c.damage(t, crash)
			cfg := testConfig(crash)
			cfg.Shards, cfg.BootID = 2, "boot-1"
			for attempt := 1; attempt <= 2; attempt++ {
				srv, err := New(cfg, quietLogger())
				if err != nil {
					t.Fatal(err)
				}
				err = srv.Start()
				if err == nil {
					srv.Stop()
					t.Fatalf("start %d: the node started without its write-ahead log", attempt)
				}
				if msg := err.Error(); !errors.Is(err, storage.ErrMissingLog) || !strings.Contains(msg, filepath.Join(crash, raftFile)) ||
					!strings.Contains(msg, filepath.Join(crash, walDir)) || !strings.Contains(msg, "docs/operations.md") {
					t.Fatalf("start %d: %v", attempt, err)
				}
				c.check(t, crash)
			}
		})
	}
}

// TestEmptyRaftFileIsRefused: a raft.db emptied (0 bytes) beside the rest
// of a node's data is refused, naming the file, rather than initialized
// as a new database (the node went on with its raft terms and votes
// reset, free to vote twice in a term, and without its site incarnation).
func TestEmptyRaftFileIsRefused(t *testing.T) {
	dir, cfg, _, _ := loggedNode(t)
	path := filepath.Join(dir, raftFile)
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	srv, err := New(cfg, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	err = srv.Start()
	if err == nil {
		srv.Stop()
		t.Fatal("the node started on an empty raft.db")
	}
	if msg := err.Error(); !errors.Is(err, storage.ErrCorrupt) || !strings.Contains(msg, path) || !strings.Contains(msg, "docs/operations.md") {
		t.Fatalf("start on an empty raft.db: %v", err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("raft.db changed: %v, %v", fi, err)
	}
}

// damagePages overwrites the first 16 bytes of every page of the bbolt
// file at path from the third on (the meta pages stay valid): opening it
// fails, and kvd moves it aside and rebuilds it.
func damagePages(t *testing.T, path string) {
	t.Helper()
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
}
