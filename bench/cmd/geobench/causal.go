package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
)

// causalResult is what one causal run measured.
type causalResult struct {
	ops       map[string][]time.Duration
	staleness []time.Duration
	tokens    []int
	errors    int
}

// runCausal runs the causal workload at addr for d: sessions clients,
// each a client with its own session doing puts (40%), gets (40%) and
// GetTxns of 3 keys (20%) on keys of keyspace, one after the other.
func runCausal(ctx context.Context, addr, keyspace string, sessions int, d time.Duration, keys int) (causalResult, error) {
	res := causalResult{ops: map[string][]time.Duration{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var firstErr error
	for s := range sessions {
		cfg := client.DefaultConfig()
		cfg.Endpoints = []string{addr}
		cfg.Keyspace = keyspace
		c, err := client.New(ctx, cfg)
		if err != nil {
			return res, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(s), 7))
			key := func() []byte { return []byte(fmt.Sprintf("causal/%05d", rng.IntN(keys))) }
			for ctx.Err() == nil {
				start := time.Now()
				var op string
				var err error
				switch r := rng.IntN(10); {
				case r < 4:
					op = "put"
					_, err = c.Put(ctx, key(), []byte("value-of-about-thirty-bytes..."))
				case r < 8:
					op = "get"
					_, err = c.Get(ctx, key())
				default:
					op = "gettxn"
					var snap uint64
					_, snap, err = c.GetTxnAt(ctx, [][]byte{key(), key(), key()})
					if err == nil {
						if wall, _ := causal.SplitHLC(snap); wall > 0 {
							mu.Lock()
							res.staleness = append(res.staleness, time.Since(time.UnixMilli(int64(wall))))
							mu.Unlock()
						}
					}
				}
				el := time.Since(start)
				mu.Lock()
				if err != nil {
					if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) && status.Code(err) != codes.DeadlineExceeded {
						res.errors++
						if firstErr == nil {
							firstErr = err
						}
					}
				} else {
					res.ops[op] = append(res.ops[op], el)
					res.tokens = append(res.tokens, len(c.SessionToken()))
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if res.errors > 0 {
		return res, fmt.Errorf("%d operations failed; the first: %w", res.errors, firstErr)
	}
	return res, nil
}

// report prints one run's figures.
func (r causalResult) report(label string) {
	fmt.Printf("%s:\n", label)
	for _, op := range []string{"put", "get", "gettxn"} {
		ds := r.ops[op]
		fmt.Printf("  %-7s n=%-6d p50 %-10v p99 %v\n", op, len(ds), pct(ds, 50), pct(ds, 99))
	}
	if len(r.staleness) > 0 {
		fmt.Printf("  gettxn snapshot staleness: p50 %v p99 %v\n", pct(r.staleness, 50), pct(r.staleness, 99))
	}
	if len(r.tokens) > 0 {
		ts := slices.Clone(r.tokens)
		slices.Sort(ts)
		fmt.Printf("  session token bytes: p50 %d p99 %d max %d\n", ts[(len(ts)-1)/2], ts[(len(ts)-1)*99/100], ts[len(ts)-1])
	}
}

// causalCompare runs the causal workload at the first site on a keyspace
// held there only (created if missing) and on the default keyspace (held
// by every site), and prints both.
func causalCompare(ctx context.Context, addrs []string, sessions int, d time.Duration) error {
	c, err := client.New(ctx, client.Config{Endpoints: []string{addrs[0]}})
	if err != nil {
		return err
	}
	defer c.Close()
	resp, err := c.Sites(ctx)
	if err != nil {
		return err
	}
	local := resp.GetLocalSite()
	if _, err := c.CreateKeyspace(ctx, "geobench-local", 16, []string{local}); err != nil && status.Code(err) != codes.AlreadyExists && !strings.Contains(err.Error(), "exists") {
		return fmt.Errorf("create keyspace geobench-local: %w", err)
	}
	single, err := runCausal(ctx, addrs[0], "geobench-local", sessions, d, 1000)
	if err != nil {
		return fmt.Errorf("single site: %w", err)
	}
	multi, err := runCausal(ctx, addrs[0], "default", sessions, d, 1000)
	if err != nil {
		return fmt.Errorf("all sites: %w", err)
	}
	single.report(fmt.Sprintf("causal workload at %s, keyspace held by %s only (%d sessions, %v)", addrs[0], local, sessions, d))
	multi.report(fmt.Sprintf("causal workload at %s, keyspace held by every site (%d sessions, %v)", addrs[0], sessions, d))
	for _, op := range []string{"put", "get", "gettxn"} {
		a, b := pct(single.ops[op], 50), pct(multi.ops[op], 50)
		if a > 0 {
			fmt.Printf("  %s p50 every site / one site: %.2f\n", op, float64(b)/float64(a))
		}
	}
	return nil
}
