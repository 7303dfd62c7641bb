package ycsbrun

import (
	"fmt"
	"strings"

	"github.com/causeway-db/causeway/bench/core"
	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// pointKey is a workload, mode and client count.
type pointKey struct {
	workload, mode string
	clients        int
}

func keyOf(r Result) pointKey { return pointKey{r.Workload, r.Mode, r.Clients} }

// Percentiles are the spreads over the rounds of each round's latency
// percentiles, in milliseconds.
type Percentiles struct {
	P50  core.Spread `json:"p50_ms"`
	P95  core.Spread `json:"p95_ms"`
	P99  core.Spread `json:"p99_ms"`
	P999 core.Spread `json:"p999_ms"`
}

// percentilesOf returns the spreads of the percentiles of ls.
func percentilesOf(ls []core.Latency) Percentiles {
	pick := func(f func(core.Latency) float64) core.Spread {
		vs := make([]float64, len(ls))
		for i, l := range ls {
			vs[i] = f(l)
		}
		return core.SpreadOf(vs)
	}
	return Percentiles{
		P50:  pick(func(l core.Latency) float64 { return l.P50Ms }),
		P95:  pick(func(l core.Latency) float64 { return l.P95Ms }),
		P99:  pick(func(l core.Latency) float64 { return l.P99Ms }),
		P999: pick(func(l core.Latency) float64 { return l.P999Ms }),
	}
}

// KindPoint is one operation kind of a Point over the rounds; Ops and
// Errors are summed over the rounds.
type KindPoint struct {
	Kind   string `json:"kind"`
	Ops    int64  `json:"ops"`
	Errors int64  `json:"errors"`
	Percentiles
}

// Point is one workload, mode and client count over the rounds: the
// median, minimum and maximum of each round's figure.
type Point struct {
	Workload   string      `json:"workload"`
	Mode       string      `json:"mode"`
	Clients    int         `json:"clients"`
	Rounds     int         `json:"rounds"`
	Throughput core.Spread `json:"throughput_ops"`
	Percentiles
	// Errors are summed over the rounds.
	Errors int64       `json:"errors"`
	Kinds  []KindPoint `json:"kinds,omitempty"`
	// CPU holds the medians of the rounds' CPU use.
	CPU core.CPUUse `json:"cpu"`
}

// Kind returns the kind's figures (zero if it did not run).
func (p Point) Kind(kind string) KindPoint {
	for _, k := range p.Kinds {
		if k.Kind == kind {
			return k
		}
	}
	return KindPoint{Kind: kind}
}

// Aggregate groups the results by workload, mode and client count, in the
// order of their first result, and summarizes each group's rounds.
func Aggregate(results []Result) []Point {
	var keys []pointKey
	groups := map[pointKey][]Result{}
	for _, res := range results {
		k := keyOf(res)
		if _, ok := groups[k]; !ok {
			keys = append(keys, k)
		}
		groups[k] = append(groups[k], res)
	}
	out := make([]Point, 0, len(keys))
	for _, k := range keys {
		rs := groups[k]
		p := Point{Workload: k.workload, Mode: k.mode, Clients: k.clients, Rounds: len(rs)}
		var tput, machine, servers, client []float64
		var lats []core.Latency
		var kinds []string
		for _, res := range rs {
			tput = append(tput, res.Throughput)
			machine, servers, client = append(machine, res.CPU.Machine), append(servers, res.CPU.Servers), append(client, res.CPU.Client)
			lats = append(lats, res.Latency)
			p.Errors += res.Errors
			p.CPU.Total = res.CPU.Total
			for _, kr := range res.Kinds {
				kinds = appendNew(kinds, kr.Kind)
			}
		}
		p.Throughput = core.SpreadOf(tput)
		p.Percentiles = percentilesOf(lats)
		p.CPU.Machine, p.CPU.Servers, p.CPU.Client = core.SpreadOf(machine).Median, core.SpreadOf(servers).Median, core.SpreadOf(client).Median
		for _, kind := range kinds {
			kp := KindPoint{Kind: kind}
			var kl []core.Latency
			for _, res := range rs {
				kr := res.Kind(kind)
				kp.Ops += kr.Ops
				kp.Errors += kr.Errors
				if kr.Ops > 0 {
					kl = append(kl, kr.Latency)
				}
			}
			kp.Percentiles = percentilesOf(kl)
			p.Kinds = append(p.Kinds, kp)
		}
		out = append(out, p)
	}
	return out
}

// Point returns the aggregate of a mode, workload and client count (filled
// by Evaluate).
func (r *Report) Point(mode, workload string, clients int) (Point, bool) {
	for _, p := range r.Points {
		if p.Mode == mode && p.Workload == workload && p.Clients == clients {
			return p, true
		}
	}
	return Point{}, false
}

// Peak returns the point with the highest median throughput of a mode and
// workload over every client count.
func (r *Report) Peak(mode, workload string) (Point, bool) {
	var best Point
	found := false
	for _, p := range r.Points {
		if p.Mode == mode && p.Workload == workload && (!found || p.Throughput.Median > best.Throughput.Median) {
			best, found = p, true
		}
	}
	return best, found
}

// Pairs are the comparisons of a Causeway mode with the etcd mode of the
// same read guarantee class: CAUSAL with serializable (both served by the
// contacted replica), STRONG with linearizable.
var Pairs = [][2]string{
	{drivers.ModeCausewayCausal, drivers.ModeEtcdSer},
	{drivers.ModeCausewayStrong, drivers.ModeEtcdLin},
}

// Ratio compares Causeway and etcd on one workload and client count, by
// the medians over the rounds.
type Ratio struct {
	Workload string `json:"workload"`
	Clients  int    `json:"clients"`
	Causeway string `json:"causeway_mode"`
	Etcd     string `json:"etcd_mode"`
	// CausewayOps and EtcdOps are median throughputs in operations per
	// second; Ratio is CausewayOps / EtcdOps (0 if etcd did nothing).
	CausewayOps float64 `json:"causeway_ops"`
	EtcdOps     float64 `json:"etcd_ops"`
	Ratio       float64 `json:"ratio"`
	// RatioMin and RatioMax bound the ratio over the rounds' ranges:
	// Causeway's slowest round against etcd's fastest, and the reverse.
	RatioMin    float64 `json:"ratio_min"`
	RatioMax    float64 `json:"ratio_max"`
	CausewayP50 float64 `json:"causeway_p50_ms"`
	CausewayP99 float64 `json:"causeway_p99_ms"`
	EtcdP50     float64 `json:"etcd_p50_ms"`
	EtcdP99     float64 `json:"etcd_p99_ms"`
}

// ratio returns a / b, 0 when b is not positive.
func ratio(a, b float64) float64 {
	if b <= 0 {
		return 0
	}
	return a / b
}

// ratioOf compares two points.
func ratioOf(c, e Point) Ratio {
	return Ratio{
		Workload: c.Workload, Clients: c.Clients, Causeway: c.Mode, Etcd: e.Mode,
		CausewayOps: c.Throughput.Median, EtcdOps: e.Throughput.Median, Ratio: ratio(c.Throughput.Median, e.Throughput.Median),
		RatioMin: ratio(c.Throughput.Min, e.Throughput.Max), RatioMax: ratio(c.Throughput.Max, e.Throughput.Min),
		CausewayP50: c.P50.Median, CausewayP99: c.P99.Median, EtcdP50: e.P50.Median, EtcdP99: e.P99.Median,
	}
}

// ComputeRatios pairs every Causeway point with the etcd point of the
// same workload and client count for each of Pairs, in point order.
func ComputeRatios(r *Report) []Ratio {
	var out []Ratio
	seen := map[pointKey]bool{}
	for _, p := range r.Points {
		k := pointKey{workload: p.Workload, clients: p.Clients}
		if seen[k] {
			continue
		}
		seen[k] = true
		for _, pr := range Pairs {
			c, ok1 := r.Point(pr[0], p.Workload, p.Clients)
			e, ok2 := r.Point(pr[1], p.Workload, p.Clients)
			if ok1 && ok2 {
				out = append(out, ratioOf(c, e))
			}
		}
	}
	return out
}

// Verdict is the outcome of one target.
type Verdict struct {
	Target string `json:"target"`
	// Want is the threshold as text, Measured the figures behind Value.
	Want     string  `json:"want"`
	Measured string  `json:"measured"`
	Value    float64 `json:"value"`
	Limit    float64 `json:"limit"`
	// Met is Value >= Limit for a ratio target, Value <= Limit for a
	// latency target; false when not Evaluated.
	Met       bool `json:"met"`
	Evaluated bool `json:"evaluated"`
	// Detail lists the per-client-count figures.
	Detail string `json:"detail,omitempty"`
}

// Status is "pass", "FAIL" or "not measured".
func (v Verdict) Status() string {
	switch {
	case !v.Evaluated:
		return "not measured"
	case v.Met:
		return "pass"
	}
	return "FAIL"
}

// readName is how a mode's reads are named in target names.
var readName = map[string]string{
	drivers.ModeCausewayCausal: "CAUSAL", drivers.ModeCausewayStrong: "STRONG",
	drivers.ModeEtcdSer: "etcd serializable", drivers.ModeEtcdLin: "etcd linearizable",
}

// throughputTarget compares the peak median throughputs (best client
// count of each system) of two modes on one workload.
func throughputTarget(r *Report, workload, cmode, emode string, limit float64) Verdict {
	v := Verdict{Target: fmt.Sprintf("YCSB-%s %s ≥ %.1f× %s", workload, readName[cmode], limit, readName[emode]),
		Want: fmt.Sprintf("≥ %.1f×", limit), Limit: limit}
	c, ok1 := r.Peak(cmode, workload)
	e, ok2 := r.Peak(emode, workload)
	if !ok1 || !ok2 || e.Throughput.Median <= 0 {
		v.Measured = fmt.Sprintf("missing %s or %s results for workload %s", cmode, emode, workload)
		return v
	}
	v.Evaluated = true
	v.Value = c.Throughput.Median / e.Throughput.Median
	v.Met = v.Value >= limit
	v.Measured = fmt.Sprintf("%.2f× (peak medians: %s %.0f ops/s at %d clients, %s %.0f ops/s at %d clients)",
		v.Value, cmode, c.Throughput.Median, c.Clients, emode, e.Throughput.Median, e.Clients)
	var per []string
	for _, ra := range ComputeRatios(r) {
		if ra.Workload == workload && ra.Causeway == cmode && ra.Etcd == emode {
			s := fmt.Sprintf("%d clients %.2f×", ra.Clients, ra.Ratio)
			if c.Rounds > 1 || e.Rounds > 1 {
				s += fmt.Sprintf(" (%.2f–%.2f)", ra.RatioMin, ra.RatioMax)
			}
			per = append(per, s)
		}
	}
	v.Detail = strings.Join(per, ", ")
	return v
}

// putLatencyTarget compares the median UPDATE p50 of workload A with one
// client of a Causeway mode and an etcd mode: Causeway's must not be
// higher.
func putLatencyTarget(r *Report, cmode, emode string) Verdict {
	v := Verdict{Target: fmt.Sprintf("1-client put p50, %s ≤ %s", cmode, emode), Want: "≤ etcd's"}
	update := ycsb.OpUpdate.String()
	c, ok1 := r.Point(cmode, "A", 1)
	e, ok2 := r.Point(emode, "A", 1)
	ck, ek := c.Kind(update), e.Kind(update)
	if !ok1 || !ok2 || ck.Ops == 0 || ek.Ops == 0 {
		v.Measured = fmt.Sprintf("missing 1-client workload A updates of %s or %s", cmode, emode)
		return v
	}
	v.Evaluated = true
	v.Value, v.Limit = ck.P50.Median, ek.P50.Median
	v.Met = v.Value <= v.Limit
	v.Want = fmt.Sprintf("≤ %.3f ms (%s)", v.Limit, emode)
	v.Measured = fmt.Sprintf("%.3f ms (workload A UPDATE; p99 %.3f ms, etcd p99 %.3f ms)", v.Value, ck.P99.Median, ek.P99.Median)
	var detail []string
	if c.Rounds > 1 || e.Rounds > 1 {
		detail = append(detail, fmt.Sprintf("rounds: Causeway %s ms, etcd %s ms", ck.P50.Format("%.3f"), ek.P50.Format("%.3f")))
	}
	if f := r.Floors; f != nil && f.Fsync.Samples > 0 {
		detail = append(detail, fmt.Sprintf("fdatasync p50 %.3f ms", f.Fsync.P50Ms))
	}
	v.Detail = strings.Join(detail, "; ")
	return v
}

// Targets are the throughput targets: workload, Causeway mode, etcd mode
// and the least ratio of their peak median throughputs.
var Targets = []struct {
	Workload, Causeway, Etcd string
	Ratio                    float64
}{
	{"A", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.0},
	{"A", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0},
	{"B", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.5},
	{"B", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0},
	{"C", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.5},
	{"C", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0},
	{"F", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.0},
	{"F", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0},
}

// Summarize fills r.Points (the rounds of each workload, mode and client
// count, after sorting the results) and r.Ratios.
func (r *Report) Summarize() {
	r.SortResults()
	r.Points = Aggregate(r.Results)
	r.Ratios = ComputeRatios(r)
}

// Evaluate summarizes r and fills r.Targets: the throughput Targets,
// compared by the peak over the client counts of each system's median
// throughput (Detail gives the ratio at every client count, with its range
// over the rounds), and the 1-client put latency of each pair (workload
// A's UPDATE p50, median over the rounds, Causeway's at most etcd's).
func Evaluate(r *Report) {
	r.Summarize()
	r.Targets = nil
	for _, t := range Targets {
		r.Targets = append(r.Targets, throughputTarget(r, t.Workload, t.Causeway, t.Etcd, t.Ratio))
	}
	for _, pr := range Pairs {
		r.Targets = append(r.Targets, putLatencyTarget(r, pr[0], pr[1]))
	}
}
