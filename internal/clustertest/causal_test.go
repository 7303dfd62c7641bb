package clustertest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/placement"
)

// crossSessionSeeds is how many seeded rounds the cross-session tests run
// per `make test`.
const crossSessionSeeds = 20

// keysOnDifferentShards returns two keys, seeded by rng, whose shards
// differ.
func keysOnDifferentShards(t *testing.T, c *Cluster, rng *rand.Rand) (x, y []byte, sx, sy placement.Shard) {
	t.Helper()
	r := c.Live()[0].Srv.Router()
	for {
		x = fmt.Appendf(nil, "xs/x%d", rng.IntN(1_000_000))
		y = fmt.Appendf(nil, "xs/y%d", rng.IntN(1_000_000))
		sx, _ = r.Shard("default", x)
		sy, _ = r.Shard("default", y)
		if sx != sy {
			return x, y, sx, sy
		}
	}
}

// TestCrossSessionCausality is the transitive-causality pattern of
// docs/consistency.md. One session writes x=i and then y=i. Other clients
// each start a fresh session, read y through the leader of y's shard, and
// then, with the token that read returned, read x through a follower of
// x's shard whose every message from its leader is delayed. The write of
// y=i depends on x=i, so the second read must return x >= i although the
// reader never saw x=i. Per-session floors cannot give this (the reader
// holds no floor for x); the session's MaxHLC as a floor on every shard
// does (docs/adr/015-cross-session-causality.md). With that floor turned
// off (guards.CausalFloor), the lagging follower serves an older x and the
// test fails.
func TestCrossSessionCausality(t *testing.T) {
	c := New(t, 3, nil)
	var checked atomic.Int64
	for seed := 1; seed <= crossSessionSeeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 0xc0ffee))
		x, y, sx, sy := keysOnDifferentShards(t, c, rng)
		_, xFollower := leaderAndFollower(t, c, sx)
		xLeader, _ := leaderAndFollower(t, c, sx)
		yLeader, _ := leaderAndFollower(t, c, sy)
		delay := time.Duration(20+rng.IntN(40)) * time.Millisecond
		c.Delay(xLeader, xFollower, delay, delay/4)
		n := crossSessionRound(t, c, seed, x, y, yLeader, xFollower, 30+rng.IntN(20))
		c.Heal()
		checked.Add(n)
	}
	t.Logf("%d cross-session read pairs checked over %d seeds, no violation", checked.Load(), crossSessionSeeds)
	if checked.Load() < crossSessionSeeds*10 {
		t.Fatalf("only %d read pairs checked: the pattern was not exercised", checked.Load())
	}
}

// crossSessionRound runs one seed: a writer session writes x=i, y=i for
// i in 1..writes through any node while two readers check the pattern.
// It returns the number of read pairs that saw some y.
func crossSessionRound(t *testing.T, c *Cluster, seed int, x, y []byte, yNode, xNode *Node, writes int) (pairs int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var done atomic.Bool
	var wg sync.WaitGroup
	var failMu sync.Mutex
	var fail error
	setFail := func(err error) {
		failMu.Lock()
		if fail == nil {
			fail = err
		}
		failMu.Unlock()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		var tok []byte
		nodes := c.Live()
		for i := 1; i <= writes && ctx.Err() == nil; i++ {
			for _, k := range [][]byte{x, y} {
				n := nodes[(i+len(k))%len(nodes)]
				r, err := n.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: k, Value: []byte(strconv.Itoa(i))})
				if err != nil {
					setFail(fmt.Errorf("seed %d: put %s=%d: %w", seed, k, i, err))
					return
				}
				tok = r.Header.Session
			}
		}
	}()
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !done.Load() && ctx.Err() == nil {
				ry, err := yNode.KV.Get(ctx, &kvv1.GetRequest{Key: y})
				if err != nil {
					setFail(fmt.Errorf("seed %d: get %s: %w", seed, y, err))
					return
				}
				if !ry.Found {
					continue
				}
				rx, err := xNode.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: ry.Header.Session}, Key: x})
				if err != nil {
					setFail(fmt.Errorf("seed %d: get %s: %w", seed, x, err))
					return
				}
				yi, _ := strconv.Atoi(string(ry.Value))
				xi, _ := strconv.Atoi(string(rx.Value))
				atomic.AddInt64(&pairs, 1)
				if xi < yi {
					setFail(fmt.Errorf("seed %d: a fresh session read %s=%d at %s, then %s=%q at %s (found %v): the write of %s=%d depended on %s=%d (causality across sessions broken)",
						seed, y, yi, yNode.ID, x, rx.Value, xNode.ID, rx.Found, y, yi, x, yi))
					return
				}
			}
		}()
	}
	wg.Wait()
	if fail != nil {
		t.Fatal(fail)
	}
	return pairs
}
