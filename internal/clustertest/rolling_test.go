package clustertest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/causeway-db/causeway/client"
)

// TestRollingRestart: the procedure of docs/operations.md "Rolling
// restart". A client writes through all three nodes of a site while each
// node in turn is stopped cleanly, started again on its data directory
// and waited for until the site has settled. Every write the client was
// acknowledged is read back afterwards, through its session, and no write
// failed: a node that stops hands its shards' leadership over, and the
// client retries at another node what the stopping one refused.
func TestRollingRestart(t *testing.T) {
	t.Parallel()
	c := New(t, 3, nil)
	ctx := ctxT(t, 4*time.Minute)
	cfg := client.DefaultConfig()
	for _, n := range c.Nodes {
		cfg.Endpoints = append(cfg.Endpoints, n.Srv.ClientAddr())
	}
	cl, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	var (
		mu      sync.Mutex
		acked   []string
		failed  []error
		slowest time.Duration
	)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := fmt.Sprintf("roll/%06d", i)
			start := time.Now()
			_, err := cl.Put(ctx, []byte(k), []byte(k))
			took := time.Since(start)
			mu.Lock()
			if err != nil {
				failed = append(failed, fmt.Errorf("put %s: %w", k, err))
			} else {
				acked = append(acked, k)
			}
			slowest = max(slowest, took)
			if took > 200*time.Millisecond {
				t.Logf("slow put %s: %v (err %v)", k, took.Round(time.Millisecond), err)
			}
			mu.Unlock()
		}
	}()
	for _, id := range []string{"n1", "n2", "n3"} {
		n := c.Node(id)
		t.Logf("stopping %s", id)
		c.Stop(n)
		t.Logf("restarting %s", id)
		c.Restart(n, nil)
		c.WaitSettled(2 * time.Minute)
		t.Logf("settled after %s", id)
	}
	close(stop)
	<-done

	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d writes acknowledged, %d failed, slowest %v", len(acked), len(failed), slowest.Round(time.Millisecond))
	if len(acked) == 0 {
		t.Fatal("no write was acknowledged during the rolling restart")
	}
	for _, err := range failed {
		t.Error(err)
	}
	for _, k := range acked {
		gctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		it, err := cl.Get(gctx, []byte(k))
		cancel()
		if err != nil || !it.Found || string(it.Value) != k {
			t.Fatalf("acknowledged write %s after the rolling restart: err %v, found %v, value %q", k, err, it.Found, it.Value)
		}
	}
}
