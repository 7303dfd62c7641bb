package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"

	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/server"
)

// TestWholeSiteRestartKeepsTheLateNode: every node of a 3-node site is
// killed, and two start again; the third, not back yet, keeps its replicas
// for its dead grace. Gossip has not seen it since the two started, so it
// is neither alive nor known down to them; its grace starts at the first
// placement round that misses it (guard restart-grace). With the guard
// off it counts as dead at once and loses every replica within seconds.
// Then it starts again and the site settles with it.
func TestWholeSiteRestartKeepsTheLateNode(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, func(cfg *server.Config) { cfg.DeadGrace = time.Minute })
	c.WaitSettled(time.Minute)
	for _, n := range c.Live() {
		c.Kill(n)
	}
	c.Restart(c.Node("n1"), nil)
	c.Restart(c.Node("n2"), nil)
	everyShardWritable(t, c.Node("n1"), time.Minute)
	// Placement rounds run every 200 ms here: the late node would lose its
	// replicas in the first of them.
	const watch = 6 * time.Second
	until := time.Now().Add(watch)
	for time.Now().Before(until) {
		m := c.Map()
		for _, sh := range m.SortedShards() {
			if !holds(m, sh, "n3") {
				t.Fatalf("n3 lost its replica of %s while it was down for less than its dead grace (%s): %v", sh, time.Minute, m.Shards[sh])
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.Restart(c.Node("n3"), nil)
	c.WaitSettled(time.Minute)
	everyShardWritable(t, c.Node("n3"), time.Minute)
}

func holds(m placement.Map, sh placement.Shard, node string) bool {
	for _, r := range m.Shards[sh] {
		if fmt.Sprint(r.Node) == node {
			return true
		}
	}
	return false
}

// TestLoneNodeSaysWhyItCannotServe: one node of a 3-node site started
// alone after the whole site was down holds no placement map (its site
// catalog has no quorum). A request with a short deadline is answered
// before that deadline with the reason, UNAVAILABLE, instead of running
// into it with nothing but "deadline exceeded".
func TestLoneNodeSaysWhyItCannotServe(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	c := New(t, 3, nil)
	c.WaitSettled(time.Minute)
	for _, n := range c.Live() {
		c.Kill(n)
	}
	n1 := c.Node("n1")
	c.Restart(n1, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	_, err := n1.KV.Get(ctx, &kvv1.GetRequest{Key: []byte("k")})
	if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), "the site catalog has no leader") {
		t.Fatalf("get on a lone node: %v; want UNAVAILABLE saying the site catalog has no leader", err)
	}
}
