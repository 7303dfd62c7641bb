package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
)

// TestStopEndsStuckWork: two nodes of a 3-node site die, so the survivor
// leads nothing and its catalog has no quorum. Its garbage collection and
// catalog loops, and clients' writes waiting for shard leaders, cannot
// finish. Stop still returns within the shutdown grace: background loops
// end at once (their lifecycle context is cancelled first) and requests
// in flight are cut after the grace. No goroutine is left behind (the
// package's goleak TestMain).
func TestStopEndsStuckWork(t *testing.T) {
	c := New(t, 3, func(cfg *server.Config) {
		cfg.Shard.GCInterval = 50 * time.Millisecond
		cfg.Shard.DigestInterval = 100 * time.Millisecond
	})
	nodes := c.Live()
	survivor := nodes[0]
	c.Kill(nodes[1])
	c.Kill(nodes[2])
	// Writes in flight on the survivor, waiting for leaders.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				_, _ = survivor.KV.Put(ctx, &kvv1.PutRequest{Key: []byte(fmt.Sprintf("stuck/%d/%d", i, j)), Value: []byte("v")})
			}
		}()
	}
	poll.Until(t, 30*time.Second, "the survivor leads no shard", func() error {
		for _, g := range survivor.Srv.Groups() {
			if g.IsLeader() {
				return fmt.Errorf("%s still leads %s", survivor.ID, g.ID())
			}
		}
		return nil
	})
	stopped := make(chan struct{})
	start := time.Now()
	go func() { c.Stop(survivor); close(stopped) }()
	limit := survivor.Cfg.ShutdownGrace + 15*time.Second
	select {
	case <-stopped:
		t.Logf("Stop returned after %v with the site's quorum lost", time.Since(start).Round(time.Millisecond))
	case <-time.After(limit):
		t.Fatalf("Stop has not returned after %v", limit)
	}
	cancel()
	wg.Wait()
}
