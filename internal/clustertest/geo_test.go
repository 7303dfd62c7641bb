package clustertest

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
	"github.com/causeway-db/causeway/internal/faultnet"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
	"github.com/causeway-db/causeway/internal/server"
	"github.com/causeway-db/causeway/internal/shard"
	"github.com/causeway-db/causeway/internal/storage"
)

// geoSeeds is how many seeded rounds TestGeoConvergence runs per
// `make test`.
const geoSeeds = 20

var threeSites = []string{"s1", "s2", "s3"}

// leaderGroup returns the replica of sh that leads in site, if any.
func (fs *fixedSites) leaderGroup(site string, sh placement.Shard) *shard.Group {
	for _, n := range fs.Sites[site].Live() {
		if g := n.Srv.Router().Local(sh); g != nil && g.IsLeader() {
			return g
		}
	}
	return nil
}

// shards lists the default keyspace's shards.
func (fs *fixedSites) shards() []placement.Shard {
	ks, _ := fs.cfg.Keyspace("default")
	out := make([]placement.Shard, 0, ks.Shards)
	for id := range ks.Shards {
		out = append(out, placement.Shard{Keyspace: "default", ID: id})
	}
	return out
}

// converged reports whether every site's leader replica of every shard
// has the same digest (what a reader sees of every key).
func (fs *fixedSites) converged() error {
	for _, sh := range fs.shards() {
		var ref storage.Digest
		for i, site := range fs.Order {
			g := fs.leaderGroup(site, sh)
			if g == nil {
				return fmt.Errorf("%s has no leader of %s", site, sh)
			}
			var d storage.Digest
			if err := g.Read(func(tx *storage.ShardTx) (err error) {
				d, err = tx.DigestAt(math.MaxUint64)
				return err
			}); err != nil {
				return err
			}
			d.Index = 0
			if i == 0 {
				ref = d
			} else if d.Slots != ref.Slots || d.Entries != ref.Entries {
				return fmt.Errorf("%s: %s holds %d keys, %s %d, digests differ", sh, fs.Order[0], ref.Entries, site, d.Entries)
			}
		}
	}
	return nil
}

// waitConverged waits up to d for every site to hold the same data.
func (fs *fixedSites) waitConverged(t *testing.T, d time.Duration) {
	t.Helper()
	start := time.Now()
	if err := poll.Wait(d, fs.converged); err != nil {
		for _, site := range fs.Order {
			for _, sh := range fs.shards() {
				if g := fs.leaderGroup(site, sh); g != nil {
					geo := g.Geo()
					t.Logf("%s %s: local %+v origins %+v stable %+v chain %v", site, sh, geo.Local, geo.Origins, geo.Stable, geo.Chain)
				}
			}
		}
		t.Fatalf("sites did not converge within %v: %v", d, err)
	}
	t.Logf("sites converged %v after healing", time.Since(start).Round(time.Millisecond))
}

// finalVersions returns each site's newest version of each key (read on
// its leader replicas).
func (fs *fixedSites) finalVersions(t *testing.T, keys []string) causalcheck.Final {
	t.Helper()
	final := causalcheck.Final{}
	for _, site := range fs.Order {
		m := map[string]causal.Version{}
		r := fs.Sites[site].Live()[0].Srv.Router()
		for _, k := range keys {
			sh, _ := r.Shard("default", []byte(k))
			g := fs.leaderGroup(site, sh)
			if g == nil {
				t.Fatalf("%s has no leader of %s", site, sh)
			}
			v, found, err := newestVersion(g, k)
			if err != nil {
				t.Fatal(err)
			}
			if found {
				m[k] = v
			}
		}
		final[site] = m
	}
	return final
}

// checkHistory runs the causal+ checker on the history and the sites'
// final states.
func checkHistory(t *testing.T, rec *causalcheck.Recorder, final causalcheck.Final) {
	t.Helper()
	h := rec.History()
	res, err := causalcheck.Check(h, final)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations, %d sessions: %s", len(h), res.Sessions, summary(res))
	if !res.OK() {
		t.Fatalf("causal+ violated:\n%s", res)
	}
}

// geoSession runs one session's operations until ctx ends or ops
// operations ran: puts, deletes, CAUSAL gets and GetTxns of keys, recorded
// in rec. It starts at site home; a moving session goes to another site
// now and then, keeping its token, and comes home when a site refuses it
// (router.ErrSessionMoved: the site has not applied its causal past yet).
// It returns the number of failed LOCAL writes (refused moves are not
// failures) and the first failure.
func geoSession(ctx context.Context, fs *fixedSites, rec *causalcheck.Recorder, rng *rand.Rand, home, name string, keys []string, ops int, moving bool) (failed int, first error) {
	var tok []byte
	gen := 0
	site := home
	sess := func() string { return fmt.Sprintf("%s/g%d", name, gen) }
	fail := func(err error, key string) {
		if moveRefused(err) {
			site = home
			return
		}
		tok, gen = nil, gen+1
		failed++
		if first == nil {
			first = fmt.Errorf("%s at %s: %w", key, site, err)
		}
	}
	for n := 0; n < ops && ctx.Err() == nil; n++ {
		if rng.IntN(8) == 0 {
			tok, gen = nil, gen+1
		}
		if moving && rng.IntN(6) == 0 {
			site = fs.Order[rng.IntN(len(fs.Order))]
		}
		nodes := fs.Sites[site].Live()
		node := nodes[rng.IntN(len(nodes))]
		key := keys[rng.IntN(len(keys))]
		rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // in flight when the workload ends: it completes
		switch r := rng.IntN(10); {
		case r < 4:
			val := fmt.Sprintf("%s/%d", sess(), n)
			h := rec.Begin(sess(), site, causalcheck.Put, key, val)
			resp, err := node.KV.Put(rctx, &kvv1.PutRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key), Value: []byte(val)})
			if err != nil {
				rec.End(h, "", causal.Version{}, outcomeOf(err))
				fail(err, key)
			} else {
				rec.End(h, "", causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}, causalcheck.OK)
				tok = resp.Header.Session
			}
		case r < 5:
			h := rec.Begin(sess(), site, causalcheck.Delete, key, "")
			resp, err := node.KV.Delete(rctx, &kvv1.DeleteRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key)})
			if err != nil {
				rec.End(h, "", causal.Version{}, outcomeOf(err))
				fail(err, key)
			} else {
				rec.End(h, "", causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}, causalcheck.OK)
				tok = resp.Header.Session
			}
		case r < 7:
			h := rec.Begin(sess(), site, causalcheck.Get, key, "")
			resp, err := node.KV.Get(rctx, &kvv1.GetRequest{Header: &kvv1.RequestHeader{Session: tok}, Key: []byte(key)})
			if err != nil {
				rec.End(h, "", causal.Version{}, causalcheck.Failed)
				if moveRefused(err) {
					site = home
				}
			} else {
				v := causal.Version{HLC: resp.Version.GetHlc(), Site: resp.Version.GetSite()}
				rec.End(h, string(resp.Value), v, causalcheck.OK)
				tok = resp.Header.Session
			}
		default:
			txnKeys := pickKeys(rng, keys, 2+rng.IntN(3))
			h := rec.Begin(sess(), site, causalcheck.GetTxn, "", "")
			req := &kvv1.GetTxnRequest{Header: &kvv1.RequestHeader{Session: tok}}
			for _, k := range txnKeys {
				req.Keys = append(req.Keys, []byte(k))
			}
			resp, err := node.KV.GetTxn(rctx, req)
			if err != nil {
				rec.EndTxn(h, nil, causalcheck.Failed)
				if moveRefused(err) {
					site = home
				}
			} else {
				reads := make([]causalcheck.Read, len(resp.Items))
				for i, it := range resp.Items {
					reads[i] = causalcheck.Read{Key: txnKeys[i], Value: string(it.Value), Version: causal.Version{HLC: it.Version.GetHlc(), Site: it.Version.GetSite()}}
				}
				rec.EndTxn(h, reads, causalcheck.OK)
				tok = resp.Header.Session
			}
		}
		cancel()
	}
	return failed, first
}

// moveRefused reports whether err is router.ErrSessionMoved: a site that
// has not applied a moving session's causal past refused it, before
// writing anything.
func moveRefused(err error) bool {
	return status.Code(err) == codes.Unavailable && strings.Contains(err.Error(), "has not applied the session's causal past")
}

// outcomeOf is the outcome of a failed write: refused before anything was
// proposed (a moving session), or unknown.
func outcomeOf(err error) causalcheck.Outcome {
	if moveRefused(err) {
		return causalcheck.Failed
	}
	return causalcheck.Unknown
}

// pickKeys returns n distinct keys of keys, at random.
func pickKeys(rng *rand.Rand, keys []string, n int) []string {
	perm := rng.Perm(len(keys))
	out := make([]string, 0, n)
	for _, i := range perm[:min(n, len(keys))] {
		out = append(out, keys[i])
	}
	return out
}

// siteFaults changes the links between sites at random until ctx ends:
// delay with jitter, loss, and whole sites cut off for a while.
func siteFaults(ctx context.Context, fs *fixedSites, rng *rand.Rand) {
	for ctx.Err() == nil {
		a := fs.Order[rng.IntN(len(fs.Order))]
		b := fs.Order[rng.IntN(len(fs.Order))]
		switch r := rng.IntN(10); {
		case a == b:
		case r < 5:
			d := time.Duration(5+rng.IntN(50)) * time.Millisecond
			fs.Net.DelaySites(a, b, d, d/4)
			fs.Net.DelaySites(b, a, d, d/4)
		case r < 7:
			loss := rng.Float64() * 0.05
			fs.Net.UpdateSiteRule(a, b, func(r *faultnet.Rule) { r.Loss = loss })
		default:
			fs.Net.PartitionSites(a, b)
			sleepCtx(ctx, time.Duration(200+rng.IntN(1200))*time.Millisecond)
			fs.Net.UpdateSiteRule(a, b, func(r *faultnet.Rule) { r.Down = false })
			fs.Net.UpdateSiteRule(b, a, func(r *faultnet.Rule) { r.Down = false })
		}
		sleepCtx(ctx, time.Duration(50+rng.IntN(250))*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// TestGeoConvergence writes the same keys concurrently at three sites
// (two sessions per site, puts, deletes, gets and GetTxns; one session of
// each site moves between sites with its token) while the links between
// sites get delay, jitter, loss and partitions that come and go. After
// healing, every site must hold identical data for every shard (digests)
// within 30 s; the history, with the final versions of every site, must
// pass the causal+ checker (no acknowledged write lost: each site's final
// version of a key is at least every acknowledged write of it). Every
// LOCAL write succeeds whatever the links between sites do. Odd seeds
// run with the sites' clocks 500 ms apart (s1 ahead, s3 behind).
func TestGeoConvergence(t *testing.T) {
	for seed := 1; seed <= geoSeeds; seed++ {
		t.Run(fmt.Sprintf("seed%d", seed), func(t *testing.T) { geoConvergenceRound(t, seed) })
	}
}

func geoConvergenceRound(t *testing.T, seed int) {
	skew := seed%2 == 1
	fs := startFixedSites(t, threeSites, fixedOptions{Shards: 2, Mutate: func(site string, cfg *server.Config) {
		if skew {
			cfg.ClockSkew = map[string]time.Duration{"s1": 500 * time.Millisecond, "s3": -500 * time.Millisecond}[site]
		}
	}})
	keys := make([]string, 8)
	for i := range keys {
		keys[i] = fmt.Sprintf("geo/k%d", i)
	}
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	frng := rand.New(rand.NewPCG(uint64(seed), 0xfa))
	wg.Add(1)
	go func() { defer wg.Done(); siteFaults(ctx, fs, frng) }()
	var mu sync.Mutex
	failed := 0
	var firstErr error
	for _, site := range fs.Order {
		for s := range 2 {
			srng := rand.New(rand.NewPCG(uint64(seed), uint64(len(site)*10+s)+uint64(site[1])))
			wg.Add(1)
			go func() {
				defer wg.Done()
				f, err := geoSession(ctx, fs, rec, srng, site, fmt.Sprintf("seed%d/%s/c%d", seed, site, s), keys, 60, s == 1)
				mu.Lock()
				failed += f
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}()
		}
	}
	wg.Wait()
	fs.Net.Heal()
	if failed > 0 {
		t.Errorf("%d LOCAL writes failed while only the links between sites were faulty; the first: %v", failed, firstErr)
	}
	fs.waitConverged(t, 30*time.Second)
	checkHistory(t, rec, fs.waitFinalVersions(t, keys, 30*time.Second))
}

// waitFinalVersions waits until every site holds the same newest version
// of each key, tombstones included (digests leave tombstones out), and
// returns them.
func (fs *fixedSites) waitFinalVersions(t *testing.T, keys []string, d time.Duration) causalcheck.Final {
	t.Helper()
	var final causalcheck.Final
	err := poll.Wait(d, func() error {
		final = fs.finalVersions(t, keys)
		for _, k := range keys {
			for _, site := range fs.Order[1:] {
				if final[site][k] != final[fs.Order[0]][k] {
					return fmt.Errorf("%s: %s holds %v, %s %v", k, fs.Order[0], final[fs.Order[0]][k], site, final[site][k])
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Logf("sites disagree on some key's newest version: %v (the checker reports it)", err)
	}
	return final
}

var errNotFound = errors.New("not found")

// waitKeys waits until every key reads as present at every site.
func (fs *fixedSites) waitKeys(t *testing.T, keys []string, d time.Duration) {
	t.Helper()
	for _, site := range fs.Order {
		for _, k := range keys {
			poll.Every(20*time.Millisecond).Until(t, d, fmt.Sprintf("%s at %s", k, site), func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n := fs.Sites[site].Live()[0]
				r, err := n.KV.Get(ctx, &kvv1.GetRequest{Key: []byte(k)})
				if err != nil {
					return err
				}
				if !r.Found {
					return errNotFound
				}
				return nil
			})
		}
	}
}
