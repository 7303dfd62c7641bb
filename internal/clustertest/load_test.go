package clustertest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/poll"
)

// writer writes distinct keys through the given nodes until stopped and
// remembers every acknowledged write.
type writer struct {
	mu    sync.Mutex
	acked map[string]string
	errs  atomic.Int64
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startWriters(c *Cluster, clients int) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{acked: map[string]string{}, stop: cancel}
	for i := 0; i < clients; i++ {
		w.wg.Add(1)
		go func(i int) {
			defer w.wg.Done()
			for j := 0; ctx.Err() == nil; j++ {
				live := c.Live()
				if len(live) == 0 {
					return
				}
				n := live[(i+j)%len(live)]
				key, val := fmt.Sprintf("load/%02d/%06d", i, j), fmt.Sprintf("v%d-%d", i, j)
				cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
				_, err := n.KV.Put(cctx, &kvv1.PutRequest{Key: []byte(key), Value: []byte(val)})
				ccancel()
				if err != nil {
					w.errs.Add(1)
					select {
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
					continue
				}
				w.mu.Lock()
				w.acked[key] = val
				w.mu.Unlock()
			}
		}(i)
	}
	return w
}

func (w *writer) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// waitProgress waits until n more writes were acknowledged.
func (w *writer) waitProgress(t *testing.T, n int, d time.Duration) {
	t.Helper()
	target := w.count() + n
	poll.Every(10*time.Millisecond).Until(t, d, fmt.Sprint(n, " more acknowledged writes"), func() error {
		if got := w.count(); got < target {
			return fmt.Errorf("writes stalled at %d (want %d), %d errors", got, target, w.errs.Load())
		}
		return nil
	})
}

// verify reads every acknowledged write back with STRONG reads.
func (w *writer) verify(t *testing.T, c *Cluster) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	live := c.Live()
	ctx := ctxT(t, 120*time.Second)
	i := 0
	for k, v := range w.acked {
		n := live[i%len(live)]
		i++
		// A read may fail while a shard elects (retryable); a read that
		// answers must answer the acknowledged value.
		var g *kvv1.GetResponse
		var err error
		for attempt := 0; attempt < 50; attempt++ {
			if g, err = n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k), Consistency: kvv1.Consistency_CONSISTENCY_STRONG}); status.Code(err) != codes.Unavailable {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil || !g.Found || string(g.Value) != v {
			t.Fatalf("acknowledged %s=%s, read through %s: %v %v", k, v, n.ID, g, err)
		}
	}
}

func TestGrowAndDrainUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, nil)
	w := startWriters(c, 8)
	w.waitProgress(t, 200, 30*time.Second)

	c.Add()
	c.Add()
	c.WaitSettled(120 * time.Second)
	checkBalance(t, c.Map(), 5)
	w.waitProgress(t, 200, 30*time.Second)

	ctx := ctxT(t, 30*time.Second)
	for _, id := range []string{"n4", "n5"} {
		if err := c.Drain(ctx, id); err != nil {
			t.Fatalf("drain %s: %v", id, err)
		}
	}
	c.WaitSettled(120*time.Second, "n4", "n5")
	for _, id := range []string{"n4", "n5"} {
		if got := len(c.Node(id).Srv.Groups()); got != 0 {
			t.Fatalf("drained node %s still hosts %d replicas", id, got)
		}
	}
	w.waitProgress(t, 200, 30*time.Second)
	w.stop()
	w.wg.Wait()
	c.Stop(c.Node("n4"))
	c.Stop(c.Node("n5"))
	c.WaitSettled(60 * time.Second)
	checkBalance(t, c.Map(), 3)
	// Replica counts on the nodes match the placement.
	counts := replicaCounts(c.Map())
	for _, n := range c.Live() {
		if got := len(n.Srv.Groups()); got != counts[placementID(n.ID)] {
			t.Fatalf("%s hosts %d replicas, placement says %d", n.ID, got, counts[placementID(n.ID)])
		}
	}
	t.Logf("%d acknowledged writes (%d failed attempts) across growth 3->5 and drain 5->3", w.count(), w.errs.Load())
	w.verify(t, c)
}

func TestLeaderKillUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 4, nil)
	w := startWriters(c, 8)
	w.waitProgress(t, 200, 30*time.Second)

	// Kill the node that leads shard 0 (abruptly).
	var victim *Node
	for _, n := range c.Live() {
		for _, g := range n.Srv.Groups() {
			if g.ID().Shard == 0 && g.IsLeader() {
				victim = n
			}
		}
	}
	if victim == nil {
		t.Fatal("no leader for shard 0")
	}
	c.Kill(victim)
	t.Logf("killed %s, leader of default/0", victim.ID)

	// Writes to shard 0 resume through the survivors.
	ctx := ctxT(t, 60*time.Second)
	var key []byte
	for i := 0; ; i++ {
		key = []byte(fmt.Sprintf("shard0-probe-%d", i))
		if sh, _ := c.Live()[0].Srv.Router().Shard("default", key); sh.ID == 0 {
			break
		}
	}
	poll.Every(20*time.Millisecond).Until(t, 30*time.Second, "writes to shard 0 resume", func() error {
		_, err := c.Live()[0].KV.Put(ctx, &kvv1.PutRequest{Key: key, Value: []byte("after-kill")})
		return err
	})
	w.waitProgress(t, 200, 30*time.Second)
	// After the grace period every shard has R replicas again, on live
	// nodes, and the catalog is back to three voters, all alive.
	c.WaitSettled(120 * time.Second)
	poll.Every(20*time.Millisecond).Until(t, 30*time.Second, "the catalog back to three live voters", func() error {
		voters, err := c.Live()[0].Srv.Catalog().Voters()
		if err == nil && (len(voters) != 3 || contains(voters, victim.ID)) {
			err = fmt.Errorf("catalog voters %v, want 3 live ones", voters)
		}
		return err
	})
	w.stop()
	w.wg.Wait()
	t.Logf("%d acknowledged writes (%d failed attempts) across the kill", w.count(), w.errs.Load())
	w.verify(t, c)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
