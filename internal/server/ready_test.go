package server

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// TestReadyMeansCaughtUp: a node holding 100,000 acknowledged keys is
// copied while it runs (as a machine crash leaves it) and started on the
// copy after a reboot, so its state database is rebuilt from the raft log.
// Once it reports ready, a scan without a session token must return every
// acknowledged key: ready means every replica applied what its log held.
// Before readiness waited for that, such a scan returned a fraction of the
// keys.
func TestReadyMeansCaughtUp(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	const keys = 100_000
	dir := t.TempDir()
	cfg := testConfig(dir)
	cfg.Shards, cfg.BootID, cfg.NoSync = 4, "boot-1", true
	n := start(t, cfg)
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for w := 0; w < 64; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= keys {
					return
				}
				if _, err := n.kv.Put(context.Background(), &kvv1.PutRequest{Key: []byte(fmt.Sprintf("ready/%06d", i)), Value: []byte("v")}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	crash := t.TempDir()
	copyDir(t, dir, crash)
	n.srv.Stop()

	rebooted := testConfig(crash)
	rebooted.Shards, rebooted.BootID, rebooted.NoSync = 4, "boot-2", true
	n2 := start(t, rebooted) // returns as soon as the node is ready
	got, pages := 0, 0
	var cont []byte
	for {
		resp, err := n2.kv.Scan(ctx(t), &kvv1.ScanRequest{Prefix: []byte("ready/"), Limit: 10000, KeysOnly: true, Continuation: cont})
		if err != nil {
			t.Fatal(err)
		}
		got += len(resp.Items)
		pages++
		if len(resp.Continuation) == 0 {
			break
		}
		cont = resp.Continuation
	}
	if got != keys {
		t.Fatalf("a scan right after the rebuilt node became ready returned %d of %d acknowledged keys", got, keys)
	}
	t.Logf("all %d keys in %d pages right after ready", got, pages)
}
