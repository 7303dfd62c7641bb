// Command geobench measures a running multi-site cluster (make geo): the
// latency of LOCAL puts at the first site, and how long each put takes to
// become visible at the other sites (remote visibility, per chain
// position). With -partition it first cuts the first site's node off from
// every other site (kvd --debug-faults), so the puts run with every other
// site away. -workload causal measures puts, gets and GetTxns of sessions
// that stay at the first site, on a keyspace held there only and on one
// held by every site. With -durability all every put waits until every site
// applied it: its latency is the write's time to global stability.
//
//	go run ./bench/cmd/geobench -sites 127.0.0.1:7379,127.0.0.1:8379,127.0.0.1:9379
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/causeway-db/causeway/client"
)

func main() {
	sites := flag.String("sites", "127.0.0.1:7379,127.0.0.1:8379,127.0.0.1:9379", "client address of one node per site, the writing site first, then the others in chain order")
	n := flag.Int("n", 200, "puts")
	partition := flag.Bool("partition", false, "cut the writing site's node off from the other sites during the puts (no visibility measured)")
	durability := flag.String("durability", "local", "durability of the puts: local or all (all: the put latency is the time to global stability)")
	workload := flag.String("workload", "visibility", "visibility (puts at the first site, polled at the others) or causal (sessions doing puts, gets and GetTxns at the first site, on a keyspace of that site only and on one of every site)")
	sessions := flag.Int("sessions", 4, "causal workload: concurrent sessions")
	duration := flag.Duration("duration", 15*time.Second, "causal workload: duration of each of its two runs")
	flag.Parse()
	if *workload == "causal" {
		ctx, cancel := context.WithTimeout(context.Background(), 2**duration+time.Minute)
		defer cancel()
		if err := causalCompare(ctx, strings.Split(*sites, ","), *sessions, *duration); err != nil {
			fmt.Fprintln(os.Stderr, "geobench:", err)
			os.Exit(1)
		}
		return
	}
	var opts []client.Option
	switch *durability {
	case "local":
	case "all":
		opts = append(opts, client.WithDurability(client.DurabilityAll))
	default:
		fmt.Fprintf(os.Stderr, "geobench: -durability %q: want local or all\n", *durability)
		os.Exit(2)
	}
	if err := run(strings.Split(*sites, ","), *n, *partition, *durability, opts); err != nil {
		fmt.Fprintln(os.Stderr, "geobench:", err)
		os.Exit(1)
	}
}

func run(addrs []string, n int, partition bool, durability string, opts []client.Option) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	clients := make([]*client.Client, len(addrs))
	for i, a := range addrs {
		c, err := client.New(ctx, client.Config{Endpoints: []string{a}})
		if err != nil {
			return err
		}
		defer c.Close()
		clients[i] = c
	}
	if partition {
		for _, site := range otherSites(ctx, clients[0]) {
			if _, err := clients[0].DebugPartition(ctx, site); err != nil {
				return fmt.Errorf("partition %s: %w", site, err)
			}
		}
		defer func() { _ = clients[0].DebugHeal(context.Background()) }()
	}
	puts := make([]time.Duration, 0, n)
	vis := make([][]time.Duration, len(addrs))
	var mu sync.Mutex
	var wg sync.WaitGroup
	prefix := fmt.Sprintf("geobench/%d/", time.Now().UnixNano())
	for i := range n {
		key := []byte(fmt.Sprintf("%s%05d", prefix, i))
		start := time.Now()
		if _, err := clients[0].Put(ctx, key, []byte("v"), opts...); err != nil {
			return fmt.Errorf("put: %w", err)
		}
		puts = append(puts, time.Since(start))
		if partition {
			continue
		}
		for j := 1; j < len(clients); j++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for ctx.Err() == nil {
					it, err := clients[j].Get(ctx, key)
					if err == nil && it.Found {
						mu.Lock()
						vis[j] = append(vis[j], time.Since(start))
						mu.Unlock()
						return
					}
					time.Sleep(time.Millisecond)
				}
			}()
		}
		time.Sleep(10 * time.Millisecond)
	}
	wg.Wait()
	fmt.Printf("%s put at %s (%d puts%s): p50 %v p99 %v\n", strings.ToUpper(durability), addrs[0], n, map[bool]string{true: ", every other site cut off"}[partition], pct(puts, 50), pct(puts, 99))
	for j := 1; j < len(addrs); j++ {
		if len(vis[j]) > 0 {
			fmt.Printf("visible at %s (chain position %d): p50 %v p99 %v\n", addrs[j], j, pct(vis[j], 50), pct(vis[j], 99))
		}
	}
	return nil
}

// otherSites lists the sites other than c's.
func otherSites(ctx context.Context, c *client.Client) []string {
	resp, err := c.Sites(ctx)
	if err != nil {
		return nil
	}
	var out []string
	for _, s := range resp.GetSites() {
		if s.GetName() != resp.GetLocalSite() {
			out = append(out, s.GetName())
		}
	}
	return out
}

func pct(ds []time.Duration, p int) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[(len(s)-1)*p/100].Round(10 * time.Microsecond)
}
