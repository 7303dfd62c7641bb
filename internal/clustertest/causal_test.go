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

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// crossSessionSeeds is how many seeded rounds the cross-session tests run
// per `make test`.
const crossSessionSeeds = 20

// opsPerSession is how many operations each client of TestRandomizedCausal
// runs per seed.
const opsPerSession = 25

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
				var r *kvv1.PutResponse
				err := retryUnavailable(ctx, func() (err error) {
					r, err = n.KV.Put(ctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: k, Value: []byte(strconv.Itoa(i))})
					return err
				})
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
				var ry *kvv1.GetResponse
				err := retryUnavailable(ctx, func() (err error) {
					ry, err = yNode.KV.Get(ctx, &kvv1.GetRequest{Key: y})
					return err
				})
				if err != nil {
					setFail(fmt.Errorf("seed %d: get %s: %w", seed, y, err))
					return
				}
				if !ry.Found {
					continue
				}
				var rx *kvv1.GetResponse
				err = retryUnavailable(ctx, func() (err error) {
					rx, err = xNode.KV.Get(ctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: ry.Header.Session}, Key: x})
					return err
				})
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

// retryUnavailable calls call until it fails with anything but UNAVAILABLE
// or ctx ends: a shard may elect while messages are delayed (on a loaded
// machine), and a client retries UNAVAILABLE (client.retryable).
func retryUnavailable(ctx context.Context, call func() error) error {
	for {
		err := call()
		if status.Code(err) != codes.Unavailable {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// TestRandomizedCausal runs a random workload of puts and CAUSAL gets on
// a 3-node site and checks the history with causalcheck: no session
// guarantee or causality across sessions is violated, and every replica
// ends with the same newest version of every key, no acknowledged write
// lost. Each seed delays, with jitter, the messages from the leaders of
// most shards to one of their followers, so followers lag; sessions send
// every request to a random node, and often end and start afresh, so
// causality must carry across sessions through reads alone. One node is
// killed for the last quarter of the seeds and stays down. With the
// MaxHLC floor turned off (guards.CausalFloor), the checker reports causal
// violations (3 to 8 per run).
func TestRandomizedCausal(t *testing.T) {
	c := New(t, 3, nil)
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	keys := make([]string, 6)
	for i := range keys {
		keys[i] = fmt.Sprintf("rc/k%02d", i)
	}
	for seed := 1; seed <= crossSessionSeeds; seed++ {
		if seed == crossSessionSeeds*3/4+1 {
			victim := c.Live()[2]
			t.Logf("seed %d: killing %s", seed, victim.ID)
			c.Kill(victim)
		}
		randomCausalRound(t, c, rec, seed, keys)
	}
	final := finalVersions(t, c, keys)
	h := rec.History()
	res, err := causalcheck.Check(h, final)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations over %d seeds, %d sessions: %s", len(h), crossSessionSeeds, res.Sessions, summary(res))
	if !res.OK() {
		t.Fatalf("causal+ violated:\n%s", res)
	}
	if want := crossSessionSeeds * 6 * opsPerSession; len(h) != want {
		t.Fatalf("%d operations recorded, want %d", len(h), want)
	}
}

func summary(res causalcheck.Result) string {
	if res.OK() {
		return "no violation"
	}
	return fmt.Sprintf("%d violations", len(res.Violations))
}

// randomCausalRound runs one seed's workload: 6 sessions of 25
// operations each.
func randomCausalRound(t *testing.T, c *Cluster, rec *causalcheck.Recorder, seed int, keys []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(uint64(seed), 0xca5a1))
	live := c.Live()
	r := live[0].Srv.Router()
	// Lag: for most shards, delay the leader's messages to a follower.
	seen := map[placement.Shard]bool{}
	for _, k := range keys {
		sh, _ := r.Shard("default", []byte(k))
		if seen[sh] || rng.IntN(4) == 0 {
			continue
		}
		seen[sh] = true
		if l, f := leaderAndFollowerOrNil(c, sh); l != nil && f != nil {
			d := time.Duration(20+rng.IntN(60)) * time.Millisecond
			c.Delay(l, f, d, d/2)
		}
	}
	defer c.Heal()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for s := range 6 {
		srng := rand.New(rand.NewPCG(uint64(seed), uint64(s)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			var tok []byte
			gen := 0
			name := func() string { return fmt.Sprintf("seed%d/s%d/g%d", seed, s, gen) }
			for n := 0; n < opsPerSession && ctx.Err() == nil; n++ {
				if srng.IntN(4) == 0 { // a new session, with nothing seen
					tok, gen = nil, gen+1
				}
				node := live[srng.IntN(len(live))]
				key := keys[srng.IntN(len(keys))]
				rctx, rcancel := context.WithTimeout(ctx, 5*time.Second)
				if srng.IntN(10) < 3 {
					val := fmt.Sprintf("%s/%d", name(), n)
					h := rec.Begin(name(), "s1", causalcheck.Put, key, val)
					resp, err := node.KV.Put(rctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key), Value: []byte(val)})
					if err != nil {
						rec.End(h, "", causal.Version{}, causalcheck.Unknown)
						tok, gen = nil, gen+1 // the session cannot know what happened
					} else {
						rec.End(h, "", causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}, causalcheck.OK)
						tok = resp.Header.Session
					}
				} else {
					h := rec.Begin(name(), "s1", causalcheck.Get, key, "")
					resp, err := node.KV.Get(rctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key)})
					if err != nil {
						rec.End(h, "", causal.Version{}, causalcheck.Failed)
					} else {
						v := causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}
						rec.End(h, string(resp.Value), v, causalcheck.OK)
						tok = resp.Header.Session
					}
				}
				rcancel()
			}
		}()
	}
	wg.Wait()
}

// leaderAndFollowerOrNil is leaderAndFollower without failing the test
// (a shard may be electing).
func leaderAndFollowerOrNil(c *Cluster, sh placement.Shard) (leader, follower *Node) {
	for _, n := range c.Live() {
		if g := n.Srv.Router().Local(sh); g != nil {
			if g.IsLeader() {
				leader = n
			} else {
				follower = n
			}
		}
	}
	return leader, follower
}

// finalVersions waits until every live node's replica holds the same
// newest version of each key, and returns them (replica = node id).
func finalVersions(t *testing.T, c *Cluster, keys []string) causalcheck.Final {
	t.Helper()
	var final causalcheck.Final
	err := poll.Wait(60*time.Second, func() error {
		final = causalcheck.Final{}
		for _, n := range c.Live() {
			m := map[string]causal.Version{}
			for _, k := range keys {
				sh, _ := n.Srv.Router().Shard("default", []byte(k))
				g := n.Srv.Router().Local(sh)
				if g == nil {
					return fmt.Errorf("%s holds no replica of %s", n.ID, sh)
				}
				v, found, err := newestVersion(g, k)
				if err != nil {
					return err
				}
				if found {
					m[k] = v
				}
			}
			final[n.ID] = m
		}
		var first map[string]causal.Version
		for id, m := range final {
			if first == nil {
				first = m
				continue
			}
			for _, k := range keys {
				if m[k] != first[k] {
					return fmt.Errorf("replicas disagree on %s (%s has %v)", k, id, m[k])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("replicas did not converge: %v (the checker reports it)", err)
	}
	return final
}

// newestVersion returns the newest version of key (a tombstone's too) in
// replica g.
func newestVersion(g *shard.Group, key string) (v causal.Version, found bool, err error) {
	err = g.Read(func(st *storage.ShardTx) error {
		rec, ok, err := st.Latest([]byte(key), true)
		v, found = rec.Version, ok
		return err
	})
	return v, found, err
}
