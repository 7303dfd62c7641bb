//go:build geoload

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	adminv1 "github.com/causeway-db/causeway/api/proto/admin/v1"
	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/causal"
	"github.com/causeway-db/causeway/internal/causalcheck"
	"github.com/causeway-db/causeway/internal/poll"
)

// loadOp is one operation of a session, for the latency report.
type loadOp struct {
	site   string
	write  bool
	sticky bool
	start  time.Time
	end    time.Time
	ok     bool
	err    string
}

// ackedWrite is a write some site acknowledged.
type ackedWrite struct {
	key  string
	ver  causal.Version
	site string
}

// loadStats gathers what the sessions and probes measured.
type loadStats struct {
	mu    sync.Mutex
	ops   []loadOp
	acked []ackedWrite
	vis   []visRec
}

// visRec is a probe write of from and when to first showed it.
type visRec struct {
	from, to string
	acked    time.Time
	seen     time.Time
}

func (s *loadStats) add(o loadOp) {
	s.mu.Lock()
	s.ops = append(s.ops, o)
	s.mu.Unlock()
}

// TestGeoLoad runs a causal workload against running sites
// (GEOLOAD_SITES=s1=ADDR,s2=ADDR,...) for GEOLOAD_DURATION, then checks
// convergence, acknowledged writes and causal+; GEOLOAD_PHASES names a file
// of "UNIXNANOS NAME" lines that split the run into phases for the
// latency report.
func TestGeoLoad(t *testing.T) {
	spec := os.Getenv("GEOLOAD_SITES")
	if spec == "" {
		t.Skip("GEOLOAD_SITES not set")
	}
	var order []string
	addr := map[string]string{}
	for _, p := range strings.Split(spec, ",") {
		n, a, _ := strings.Cut(p, "=")
		order = append(order, n)
		addr[n] = a
	}
	dur, err := time.ParseDuration(os.Getenv("GEOLOAD_DURATION"))
	if err != nil {
		dur = time.Minute
	}
	run := time.Now().Unix()
	keys := make([]string, 48)
	for i := range keys {
		keys[i] = fmt.Sprintf("gl/%d/k%02d", run, i)
	}
	t0 := time.Now()
	rec := causalcheck.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	st := &loadStats{}
	ctx, cancel := context.WithTimeout(context.Background(), dur)
	defer cancel()
	var wg sync.WaitGroup
	for si, site := range order {
		for k := range 3 {
			mover := k == 2
			eps := []string{addr[site]}
			if mover {
				for _, o := range order {
					if o != site {
						eps = append(eps, addr[o])
					}
				}
			}
			c := siteClient(t, eps, 3*time.Second)
			name := fmt.Sprintf("%s/c%d", site, k)
			rng := rand.New(rand.NewPCG(uint64(si), uint64(k)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				loadSession(ctx, rec, st, c, rng, site, name, keys, !mover)
			}()
		}
	}
	// Visibility probes: every 500 ms each site writes probe/SITE; a
	// poller per other site reads it there every 50 ms.
	type probe struct {
		ver   causal.Version
		acked time.Time
	}
	var probeKeys []string
	for _, from := range order {
		pk := fmt.Sprintf("gl/%d/probe/%s", run, from)
		probeKeys = append(probeKeys, pk)
		pc := siteClient(t, []string{addr[from]}, 3*time.Second)
		var pmu sync.Mutex
		var pending = map[string][]probe{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				octx, ocancel := context.WithTimeout(context.Background(), 3*time.Second)
				v, err := pc.Put(octx, []byte(pk), []byte(strconv.Itoa(n)))
				ocancel()
				if err == nil {
					now := time.Now()
					st.mu.Lock()
					st.acked = append(st.acked, ackedWrite{pk, v, from})
					st.mu.Unlock()
					pmu.Lock()
					for _, to := range order {
						if to != from {
							pending[to] = append(pending[to], probe{v, now})
						}
					}
					pmu.Unlock()
				}
				sleep(ctx, 500*time.Millisecond)
			}
		}()
		for _, to := range order {
			if to == from {
				continue
			}
			rc := siteClient(t, []string{addr[to]}, 3*time.Second)
			wg.Add(1)
			go func() {
				defer wg.Done()
				// Poll until every probe is seen, or 5 minutes after the load.
				pctx, pcancel := context.WithTimeout(context.Background(), dur+5*time.Minute)
				defer pcancel()
				for pctx.Err() == nil {
					pmu.Lock()
					n := len(pending[to])
					pmu.Unlock()
					if n == 0 {
						if ctx.Err() != nil {
							return
						}
						sleep(pctx, 50*time.Millisecond)
						continue
					}
					octx, ocancel := context.WithTimeout(pctx, 2*time.Second)
					it, err := rc.Get(octx, []byte(pk))
					ocancel()
					if err == nil {
						now := time.Now()
						pmu.Lock()
						ps := pending[to]
						i := 0
						for i < len(ps) && !it.Version.Less(ps[i].ver) {
							st.mu.Lock()
							st.vis = append(st.vis, visRec{from, to, ps[i].acked, now})
							st.mu.Unlock()
							i++
						}
						pending[to] = ps[i:]
						pmu.Unlock()
					}
					sleep(pctx, 50*time.Millisecond)
				}
			}()
		}
	}
	<-ctx.Done()
	loadEnd := time.Now()
	wg.Wait()
	t.Logf("load done; probes settled %v after its end", time.Since(loadEnd).Round(time.Millisecond))

	// Convergence: every key's newest version at every site.
	readers := map[string]*client.Client{}
	for _, site := range order {
		readers[site] = siteClient(t, []string{addr[site]}, 3*time.Second)
	}
	all := append(slices.Clone(keys), probeKeys...)
	var final causalcheck.Final
	if err := poll.Every(500*time.Millisecond).Wait(5*time.Minute, func() error {
		var err error
		if final, err = finalVersions(readers, all); err != nil {
			return err
		}
		return converged(order, final)
	}); err != nil {
		t.Errorf("the sites did not converge within 5 minutes after the load: %v", err)
	}
	t.Logf("sites converged %v after the load ended", time.Since(loadEnd).Round(time.Millisecond))

	// Every acknowledged write: at every site, the key's newest version is
	// at least it.
	st.mu.Lock()
	lost := 0
	for _, a := range st.acked {
		for _, site := range order {
			if final[site][a.key].Less(a.ver) {
				lost++
				if lost <= 10 {
					t.Errorf("acknowledged write %s=%v (at %s) missing at %s: newest there %v", a.key, a.ver, a.site, site, final[site][a.key])
				}
			}
		}
	}
	t.Logf("%d acknowledged writes checked at %d sites: %d missing", len(st.acked), len(order), lost)
	st.mu.Unlock()

	// Digests: anti-entropy finds no differing slot.
	for _, site := range order {
		rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
		differing := 0
		err := readers[site].Repair(rctx, client.RepairOptions{Keyspace: "default"}, func(p *adminv1.RepairProgress) {
			differing += int(p.GetSlotsDiffering())
		})
		rcancel()
		if err != nil {
			t.Errorf("digest comparison from %s: %v", site, err)
		} else if differing != 0 {
			t.Errorf("%d digest slots differ between %s and the other sites after convergence", differing, site)
		}
	}

	h := rec.History()
	cfinal := causalcheck.Final{}
	for site, m := range final {
		cm := map[string]causal.Version{}
		for _, k := range keys {
			if v, ok := m[k]; ok {
				cm[k] = v
			}
		}
		cfinal[site] = cm
	}
	res, err := causalcheck.Check(h, cfinal)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d operations, %d sessions: %d violations", len(h), res.Sessions, len(res.Violations))
	if !res.OK() {
		t.Errorf("causal+ violated:\n%s", res)
	}
	report(t, order, st, t0, loadEnd)
}

// loadSession runs one session until ctx ends: a read (a Get or a GetTxn
// of three keys), then a write of another key (a put of a unique value, or
// now and then a delete), recorded in rec and st.
func loadSession(ctx context.Context, rec *causalcheck.Recorder, st *loadStats, c *client.Client, rng *rand.Rand, site, name string, keys []string, sticky bool) {
	for n := 0; ctx.Err() == nil; n++ {
		// A read, then a write of another key.
		octx, cancel := context.WithTimeout(context.Background(), 8*time.Second)
		start := time.Now()
		if rng.IntN(10) < 6 {
			key := keys[rng.IntN(len(keys))]
			h := rec.Begin(name, site, causalcheck.Get, key, "")
			it, err := c.Get(octx, []byte(key))
			if err != nil {
				rec.End(h, "", causal.Version{}, causalcheck.Failed)
			} else {
				rec.End(h, string(it.Value), it.Version, causalcheck.OK)
			}
			st.add(loadOp{site: site, sticky: sticky, start: start, end: time.Now(), ok: err == nil, err: errText(err)})
		} else {
			perm := rng.Perm(len(keys))[:3]
			ks := make([][]byte, len(perm))
			for i, p := range perm {
				ks[i] = []byte(keys[p])
			}
			h := rec.Begin(name, site, causalcheck.GetTxn, "", "")
			items, err := c.GetTxn(octx, ks)
			if err != nil {
				rec.EndTxn(h, nil, causalcheck.Failed)
			} else {
				reads := make([]causalcheck.Read, len(items))
				for i, it := range items {
					reads[i] = causalcheck.Read{Key: string(ks[i]), Value: string(it.Value), Version: it.Version}
				}
				rec.EndTxn(h, reads, causalcheck.OK)
			}
			st.add(loadOp{site: site, sticky: sticky, start: start, end: time.Now(), ok: err == nil, err: errText(err)})
		}
		cancel()
		octx, cancel = context.WithTimeout(context.Background(), 8*time.Second)
		key := keys[rng.IntN(len(keys))]
		start = time.Now()
		var v causal.Version
		var err error
		if rng.IntN(8) == 0 {
			h := rec.Begin(name, site, causalcheck.Delete, key, "")
			v, _, err = c.Delete(octx, []byte(key))
			if err != nil {
				rec.End(h, "", causal.Version{}, causalcheck.Unknown)
			} else {
				rec.End(h, "", v, causalcheck.OK)
			}
		} else {
			val := fmt.Sprintf("%s/%d", name, n)
			h := rec.Begin(name, site, causalcheck.Put, key, val)
			v, err = c.Put(octx, []byte(key), []byte(val))
			if err != nil {
				rec.End(h, "", causal.Version{}, causalcheck.Unknown)
			} else {
				rec.End(h, "", v, causalcheck.OK)
			}
		}
		cancel()
		st.add(loadOp{site: site, write: true, sticky: sticky, start: start, end: time.Now(), ok: err == nil, err: errText(err)})
		if err == nil {
			st.mu.Lock()
			st.acked = append(st.acked, ackedWrite{key, v, site})
			st.mu.Unlock()
		}
		sleep(ctx, time.Duration(15+rng.IntN(25))*time.Millisecond)
	}
}

// errText shortens err for the report.
func errText(err error) string {
	if err == nil {
		return ""
	}
	s := err.Error()
	if len(s) > 200 {
		s = s[:200]
	}
	return s
}

// phase is a part of the run, between two lines of GEOLOAD_PHASES.
type phase struct {
	name       string
	start, end time.Time
}

// phases splits [t0, end) at the lines of GEOLOAD_PHASES.
func phases(t0, end time.Time) []phase {
	out := []phase{{name: "baseline", start: t0}}
	if f := os.Getenv("GEOLOAD_PHASES"); f != "" {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			ns, name, ok := strings.Cut(line, " ")
			if !ok {
				continue
			}
			n, err := strconv.ParseInt(ns, 10, 64)
			if err != nil {
				continue
			}
			at := time.Unix(0, n)
			if at.Before(t0) || at.After(end) {
				continue
			}
			out[len(out)-1].end = at
			out = append(out, phase{name: name, start: at})
		}
	}
	out[len(out)-1].end = end
	return out
}

// pct returns the p-quantile of sorted ds.
func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// report logs, per phase and site, the latencies, failures and longest
// gap between acknowledged writes of the sessions that stay at their site,
// and the probes' visibility at every other site.
func report(t *testing.T, order []string, st *loadStats, t0, end time.Time) {
	st.mu.Lock()
	defer st.mu.Unlock()
	var b strings.Builder
	for _, ph := range phases(t0, end) {
		fmt.Fprintf(&b, "\n== %s (%s, %v)\n", ph.name, ph.start.Format("15:04:05"), ph.end.Sub(ph.start).Round(time.Second))
		for _, site := range order {
			var lat []time.Duration
			var rlat []time.Duration
			var okEnds []time.Time
			fails, rfails := 0, 0
			errs := map[string]int{}
			for _, o := range st.ops {
				if o.site != site || !o.sticky || o.start.Before(ph.start) || !o.start.Before(ph.end) {
					continue
				}
				if !o.ok {
					if o.write {
						fails++
					} else {
						rfails++
					}
					errs[o.err]++
					continue
				}
				if o.write {
					lat = append(lat, o.end.Sub(o.start))
					okEnds = append(okEnds, o.end)
				} else {
					rlat = append(rlat, o.end.Sub(o.start))
				}
			}
			slices.Sort(lat)
			slices.Sort(rlat)
			sort.Slice(okEnds, func(i, j int) bool { return okEnds[i].Before(okEnds[j]) })
			gap := time.Duration(0)
			prev := ph.start
			for _, e := range okEnds {
				gap = max(gap, e.Sub(prev))
				prev = e
			}
			gap = max(gap, ph.end.Sub(prev))
			fmt.Fprintf(&b, "  %s writes ok %d failed %d p50 %v p99 %v max %v longest gap %v | reads ok %d failed %d p50 %v p99 %v\n",
				site, len(lat), fails, pct(lat, .5).Round(100*time.Microsecond), pct(lat, .99).Round(100*time.Microsecond),
				pct(lat, 1).Round(100*time.Microsecond), gap.Round(time.Millisecond),
				len(rlat), rfails, pct(rlat, .5).Round(100*time.Microsecond), pct(rlat, .99).Round(100*time.Microsecond))
			var es []string
			for e, n := range errs {
				es = append(es, fmt.Sprintf("%dx %s", n, e))
			}
			sort.Strings(es)
			for i, e := range es {
				if i >= 3 {
					break
				}
				fmt.Fprintf(&b, "      err: %s\n", e)
			}
		}
		for _, from := range order {
			for _, to := range order {
				if from == to {
					continue
				}
				var vs []time.Duration
				for _, v := range st.vis {
					if v.from == from && v.to == to && !v.acked.Before(ph.start) && v.acked.Before(ph.end) {
						vs = append(vs, v.seen.Sub(v.acked))
					}
				}
				slices.Sort(vs)
				if len(vs) > 0 {
					fmt.Fprintf(&b, "  visibility %s->%s: n %d p50 %v p99 %v max %v\n", from, to, len(vs),
						pct(vs, .5).Round(time.Millisecond), pct(vs, .99).Round(time.Millisecond), pct(vs, 1).Round(time.Millisecond))
				}
			}
		}
	}
	t.Log(b.String())
}
