// Command geobench measures a running multi-site cluster (make geo): the
// latency of LOCAL puts at the first site, and how long each put takes to
// become visible at the other sites (remote visibility, per chain
// position). With -partition it first cuts the first site's node off from
// every other site (kvd --debug-faults), so the puts run with every other
// site away. -workload causal measures puts, gets and GetTxns of sessions
// that stay at the first site, on a keyspace held there only and on one
// held by every site. With -durability all every put waits until every site
// applied it: its latency is the write's time to global stability.
// -single-site writes to a keyspace held by the first site only (created if
// missing): the same puts without any other site.
//
// -system etcd measures an etcd cluster stretched over the sites in the
// same way (etcd.go): -sites lists one member's client address per site,
// puts go to the first, and the others are polled with serializable reads
// (served by that member alone). -json writes the figures for
// bench/cmd/georeport (bench/geo-compare.sh).
//
//	go run ./bench/cmd/geobench -sites 127.0.0.1:7379,127.0.0.1:8379,127.0.0.1:9379
//	go run ./bench/cmd/geobench -system etcd -sites 127.0.0.1:22379,127.0.0.1:22389,127.0.0.1:22399
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-db/causeway/client"
)

func main() {
	sites := flag.String("sites", "127.0.0.1:7379,127.0.0.1:8379,127.0.0.1:9379", "client address of one node per site, the writing site first, then the others in chain order")
	system := flag.String("system", "causeway", "causeway or etcd (-sites are then etcd members' client addresses, one per site)")
	n := flag.Int("n", 200, "puts")
	warmup := flag.Int("warmup", 10, "puts before the measured ones (connections, a new keyspace's shards)")
	partition := flag.Bool("partition", false, "cut the writing site's node off from the other sites during the puts (no visibility measured)")
	singleSite := flag.Bool("single-site", false, "put into a keyspace held by the writing site only, geobench-single-SITE (created if missing); no visibility measured")
	durability := flag.String("durability", "local", "durability of the puts: local or all (all: the put latency is the time to global stability)")
	visTimeout := flag.Duration("visibility-timeout", 30*time.Second, "how long a put is polled at another site before it counts as missing")
	jsonOut := flag.String("json", "", "also write the figures as JSON to this file")
	workload := flag.String("workload", "visibility", "visibility (puts at the first site, polled at the others) or causal (sessions doing puts, gets and GetTxns at the first site, on a keyspace of that site only and on one of every site)")
	sessions := flag.Int("sessions", 4, "causal workload: concurrent sessions")
	duration := flag.Duration("duration", 15*time.Second, "causal workload: duration of each of its two runs")
	flag.Parse()
	addrs := strings.Split(*sites, ",")
	if *workload == "causal" {
		ctx, cancel := context.WithTimeout(context.Background(), 2**duration+time.Minute)
		defer cancel()
		if err := causalCompare(ctx, addrs, *sessions, *duration); err != nil {
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
	if *system != "causeway" && (*partition || *singleSite || *durability != "local") {
		fmt.Fprintln(os.Stderr, "geobench: -partition, -single-site and -durability are Causeway's")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var st store
	var err error
	switch *system {
	case "causeway":
		st, err = openCauseway(ctx, addrs, *singleSite, opts)
	case "etcd":
		st, err = openEtcd(ctx, addrs)
	default:
		fmt.Fprintf(os.Stderr, "geobench: -system %q: want causeway or etcd\n", *system)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "geobench:", err)
		os.Exit(1)
	}
	res, err := run(ctx, st, addrs, *n, *warmup, *partition, *visTimeout)
	st.close()
	if err != nil {
		fmt.Fprintln(os.Stderr, "geobench:", err)
		os.Exit(1)
	}
	res.System, res.Durability, res.Partition, res.SingleSite = *system, *durability, *partition, *singleSite
	res.print()
	if *jsonOut != "" {
		if err := res.writeJSON(*jsonOut); err != nil {
			fmt.Fprintln(os.Stderr, "geobench:", err)
			os.Exit(1)
		}
	}
}

// store is what the measurement needs of a system: puts at the first site
// and reads at each of the others.
type store interface {
	// put writes key at the first site.
	put(ctx context.Context, key []byte) error
	// visible reports, for each key, whether site j (> 0) serves it, in one
	// request.
	visible(ctx context.Context, j int, keys [][]byte) ([]bool, error)
	// describe fills what the system tells of its sites into res.
	describe(ctx context.Context, res *result)
	// partition cuts the first site off from the others; the returned
	// function heals it.
	partition(ctx context.Context) (func(), error)
	close()
}

// result is what one visibility run measured.
type result struct {
	System     string `json:"system"`
	Durability string `json:"durability"`
	Partition  bool   `json:"partition,omitempty"`
	SingleSite bool   `json:"single_site,omitempty"`
	Keyspace   string `json:"keyspace,omitempty"`
	// Addrs and Names are the sites' addresses and names (Causeway's site
	// names, etcd's member names), the writing site first.
	Addrs []string `json:"addrs"`
	Names []string `json:"names"`
	// Chain is the writes' chain of sites (Causeway).
	Chain []string `json:"chain,omitempty"`
	// Leader is the etcd member leading the cluster at the start.
	Leader     string       `json:"leader,omitempty"`
	Puts       stats        `json:"puts"`
	Visibility []visibility `json:"visibility,omitempty"`
}

// stats summarizes latencies in milliseconds.
type stats struct {
	N     int     `json:"n"`
	MinMs float64 `json:"min_ms"`
	P50Ms float64 `json:"p50_ms"`
	P99Ms float64 `json:"p99_ms"`
	MaxMs float64 `json:"max_ms"`
}

// visibility is how long the puts took to show at one other site.
type visibility struct {
	Addr string `json:"addr"`
	Name string `json:"name"`
	// Position is the site's place in the chain (1: next to the writer);
	// 0 when unknown (etcd).
	Position int   `json:"position,omitempty"`
	Delay    stats `json:"delay"`
	// Missing counts puts not seen within -visibility-timeout.
	Missing int `json:"missing,omitempty"`
}

func summarize(ds []time.Duration) stats {
	if len(ds) == 0 {
		return stats{}
	}
	ms := func(d time.Duration) float64 {
		return float64(d.Round(10*time.Microsecond)) / float64(time.Millisecond)
	}
	return stats{N: len(ds), MinMs: ms(slices.Min(ds)), P50Ms: ms(pct(ds, 50)), P99Ms: ms(pct(ds, 99)), MaxMs: ms(slices.Max(ds))}
}

func run(ctx context.Context, st store, addrs []string, n, warmup int, partition bool, visTimeout time.Duration) (*result, error) {
	res := &result{Addrs: addrs, Names: slices.Clone(addrs)}
	st.describe(ctx, res)
	if partition {
		heal, err := st.partition(ctx)
		if err != nil {
			return nil, err
		}
		defer heal()
	}
	readers := len(addrs)
	if partition || res.SingleSite {
		readers = 1
	}
	puts := make([]time.Duration, 0, n)
	pollers := make([]*poller, len(addrs))
	var wg sync.WaitGroup
	rctx, cancel := context.WithCancel(ctx) // ends the pollers early if a put fails
	defer func() {
		cancel()
		wg.Wait()
	}()
	for j := 1; j < readers; j++ {
		pollers[j] = &poller{st: st, site: j, timeout: visTimeout, pending: map[string]time.Time{}}
		wg.Add(1)
		go func() {
			defer wg.Done()
			pollers[j].run(rctx)
		}()
	}
	prefix := fmt.Sprintf("geobench/%d/", time.Now().UnixNano())
	// The warm-up puts are retried for a while: a keyspace just created
	// (-single-site) serves once its shards are placed.
	ready := time.Now().Add(time.Minute)
	for i := 0; i < warmup; {
		if err := st.put(ctx, []byte(fmt.Sprintf("%swarmup/%05d", prefix, i))); err != nil {
			if time.Now().After(ready) || ctx.Err() != nil {
				return nil, fmt.Errorf("warm-up put: %w", err)
			}
			time.Sleep(200 * time.Millisecond)
			continue
		}
		i++
	}
	for i := range n {
		key := []byte(fmt.Sprintf("%s%05d", prefix, i))
		// The readers poll from the moment the put starts, so a site that
		// applies the write before the writer's answer arrives (etcd's
		// leader, when a follower writes) is timed as such.
		start := time.Now()
		for j := 1; j < readers; j++ {
			pollers[j].add(key, start)
		}
		if err := st.put(ctx, key); err != nil {
			return nil, fmt.Errorf("put: %w", err)
		}
		puts = append(puts, time.Since(start))
		time.Sleep(10 * time.Millisecond)
	}
	for j := 1; j < readers; j++ {
		pollers[j].finish()
	}
	wg.Wait()
	res.Puts = summarize(puts)
	for j := 1; j < readers; j++ {
		pl := pollers[j]
		v := visibility{Addr: addrs[j], Name: res.Names[j], Delay: summarize(pl.seen), Missing: pl.missing}
		if len(res.Chain) > 0 {
			v.Position = slices.Index(res.Chain, res.Names[j])
		}
		res.Visibility = append(res.Visibility, v)
	}
	return res, nil
}

func (r *result) print() {
	ms := func(v float64) time.Duration { return time.Duration(math.Round(v*1000)) * time.Microsecond }
	var what []string
	if r.Partition {
		what = append(what, "every other site cut off")
	}
	if r.SingleSite {
		what = append(what, "keyspace "+r.Keyspace+" held by "+r.Names[0]+" only")
	}
	if r.Leader != "" {
		what = append(what, "leader "+r.Leader)
	}
	extra := ""
	if len(what) > 0 {
		extra = ", " + strings.Join(what, ", ")
	}
	kind := "etcd put"
	if r.System == "causeway" {
		kind = "causeway " + strings.ToUpper(r.Durability) + " put"
	}
	fmt.Printf("%s at %s (%s, %d puts%s): p50 %v p99 %v\n", kind, r.Addrs[0], r.Names[0], r.Puts.N, extra, ms(r.Puts.P50Ms), ms(r.Puts.P99Ms))
	for _, v := range r.Visibility {
		where := v.Name
		if v.Position > 0 {
			where = fmt.Sprintf("%s, chain position %d", v.Name, v.Position)
		}
		miss := ""
		if v.Missing > 0 {
			miss = fmt.Sprintf(", %d not seen", v.Missing)
		}
		fmt.Printf("visible at %s (%s): p50 %v p99 %v%s\n", v.Addr, where, ms(v.Delay.P50Ms), ms(v.Delay.P99Ms), miss)
	}
}

func (r *result) writeJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// causewayStore writes through a client of the first site and reads
// through one client per other site, each with its own session.
type causewayStore struct {
	clients  []*client.Client
	opts     []client.Option
	keyspace string
}

func openCauseway(ctx context.Context, addrs []string, singleSite bool, opts []client.Option) (*causewayStore, error) {
	s := &causewayStore{opts: opts, keyspace: client.DefaultKeyspace}
	if singleSite {
		c, err := client.New(ctx, client.Config{Endpoints: []string{addrs[0]}})
		if err != nil {
			return nil, err
		}
		resp, err := c.Sites(ctx)
		if err == nil {
			s.keyspace = "geobench-single-" + resp.GetLocalSite()
			_, err = c.CreateKeyspace(ctx, s.keyspace, 16, []string{resp.GetLocalSite()})
			if status.Code(err) == codes.AlreadyExists || (err != nil && strings.Contains(err.Error(), "exists")) {
				err = nil
			}
		}
		c.Close()
		if err != nil {
			return nil, fmt.Errorf("keyspace held by the first site only: %w", err)
		}
		addrs = addrs[:1]
	}
	for _, a := range addrs {
		c, err := client.New(ctx, client.Config{Endpoints: []string{a}, Keyspace: s.keyspace})
		if err != nil {
			s.close()
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	return s, nil
}

func (s *causewayStore) put(ctx context.Context, key []byte) error {
	_, err := s.clients[0].Put(ctx, key, []byte("v"), s.opts...)
	return err
}

func (s *causewayStore) visible(ctx context.Context, j int, keys [][]byte) ([]bool, error) {
	items, err := s.clients[j].BatchGet(ctx, keys)
	if err != nil {
		return nil, err
	}
	found := make([]bool, len(keys))
	for i := range min(len(items), len(keys)) {
		found[i] = items[i].Found
	}
	return found, nil
}

// describe names each address's site and the chain of the first site's
// writes: the keyspace's sites, rotated to start at the writer.
func (s *causewayStore) describe(ctx context.Context, res *result) {
	res.Keyspace = s.keyspace
	res.SingleSite = s.keyspace != client.DefaultKeyspace
	for i, c := range s.clients {
		if resp, err := c.Sites(ctx); err == nil {
			res.Names[i] = resp.GetLocalSite()
		}
	}
	ks, err := s.clients[0].GetKeyspace(ctx, s.keyspace)
	if err != nil {
		return
	}
	sites := ks.GetSites()
	if k := slices.Index(sites, res.Names[0]); k >= 0 {
		res.Chain = append(slices.Clone(sites[k:]), sites[:k]...)
	}
}

func (s *causewayStore) partition(ctx context.Context) (func(), error) {
	for _, site := range otherSites(ctx, s.clients[0]) {
		if _, err := s.clients[0].DebugPartition(ctx, site); err != nil {
			_ = s.clients[0].DebugHeal(context.Background())
			return nil, fmt.Errorf("partition %s: %w", site, err)
		}
	}
	return func() { _ = s.clients[0].DebugHeal(context.Background()) }, nil
}

func (s *causewayStore) close() {
	for _, c := range s.clients {
		c.Close()
	}
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
