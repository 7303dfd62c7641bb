package ycsbrun

import (
	"fmt"

	"github.com/causeway-db/causeway/bench/drivers"
	"github.com/causeway-db/causeway/bench/ycsb"
)

// Pairs are the comparisons of a Causeway mode with the etcd mode of the
// same read guarantee class: CAUSAL with serializable (both served by the
// contacted replica), STRONG with linearizable.
var Pairs = [][2]string{
	{drivers.ModeCausewayCausal, drivers.ModeEtcdSer},
	{drivers.ModeCausewayStrong, drivers.ModeEtcdLin},
}

// Ratio compares Causeway and etcd on one workload and client count.
type Ratio struct {
	Workload string `json:"workload"`
	Clients  int    `json:"clients"`
	Causeway string `json:"causeway_mode"`
	Etcd     string `json:"etcd_mode"`
	// CausewayOps and EtcdOps are throughputs in operations per second;
	// Ratio is CausewayOps / EtcdOps (0 if etcd did nothing).
	CausewayOps float64 `json:"causeway_ops"`
	EtcdOps     float64 `json:"etcd_ops"`
	Ratio       float64 `json:"ratio"`
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

// ComputeRatios pairs every Causeway result with the etcd result of the
// same workload and client count for each of Pairs, in result order.
func ComputeRatios(r *Report) []Ratio {
	var out []Ratio
	seen := map[string]bool{}
	for _, res := range r.Results {
		key := fmt.Sprintf("%s/%d", res.Workload, res.Clients)
		if seen[key] {
			continue
		}
		seen[key] = true
		for _, p := range Pairs {
			c, ok1 := r.Find(p[0], res.Workload, res.Clients)
			e, ok2 := r.Find(p[1], res.Workload, res.Clients)
			if !ok1 || !ok2 {
				continue
			}
			out = append(out, Ratio{
				Workload: res.Workload, Clients: res.Clients, Causeway: p[0], Etcd: p[1],
				CausewayOps: c.Throughput, EtcdOps: e.Throughput, Ratio: ratio(c.Throughput, e.Throughput),
				CausewayP50: c.Latency.P50Ms, CausewayP99: c.Latency.P99Ms,
				EtcdP50: e.Latency.P50Ms, EtcdP99: e.Latency.P99Ms,
			})
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

// Status is "met", "not met" or "not measured".
func (v Verdict) Status() string {
	switch {
	case !v.Evaluated:
		return "not measured"
	case v.Met:
		return "met"
	}
	return "not met"
}

// throughputTarget compares the peak throughputs (best client count of
// each system) of two modes on one workload.
func throughputTarget(r *Report, name, workload, cmode, emode string, limit float64) Verdict {
	v := Verdict{Target: name, Want: fmt.Sprintf("≥ %.1f×", limit), Limit: limit}
	c, ok1 := r.Peak(cmode, workload)
	e, ok2 := r.Peak(emode, workload)
	if !ok1 || !ok2 || e.Throughput <= 0 {
		v.Measured = fmt.Sprintf("missing %s or %s results for workload %s", cmode, emode, workload)
		return v
	}
	v.Evaluated = true
	v.Value = c.Throughput / e.Throughput
	v.Met = v.Value >= limit
	v.Measured = fmt.Sprintf("%.2f× (peak %s %.0f ops/s at %d clients vs %s %.0f ops/s at %d clients)",
		v.Value, cmode, c.Throughput, c.Clients, emode, e.Throughput, e.Clients)
	for _, ra := range ComputeRatios(r) {
		if ra.Workload == workload && ra.Causeway == cmode && ra.Etcd == emode {
			if v.Detail != "" {
				v.Detail += ", "
			}
			v.Detail += fmt.Sprintf("%d clients %.2f×", ra.Clients, ra.Ratio)
		}
	}
	return v
}

// PutLatencyTarget is the 1-client put latency target: Causeway's median
// UPDATE latency of workload A with one client at most twice the disk's
// median fdatasync plus 0.5 ms.
func PutLatencyTarget(r *Report) Verdict {
	v := Verdict{Target: "1-client put latency p50 ≤ 2 × fdatasync p50 + 0.5 ms"}
	if r.Floors == nil || r.Floors.Fsync.Samples == 0 {
		v.Measured = "no fdatasync floor measured"
		return v
	}
	v.Limit = 2*r.Floors.Fsync.P50Ms + 0.5
	v.Want = fmt.Sprintf("≤ %.3f ms (fdatasync p50 %.3f ms)", v.Limit, r.Floors.Fsync.P50Ms)
	res, ok := r.Find(drivers.ModeCausewayCausal, "A", 1)
	if !ok {
		res, ok = r.Find(drivers.ModeCausewayStrong, "A", 1)
	}
	kr := res.Kind(ycsb.OpUpdate.String())
	if !ok || kr.Ops == 0 {
		v.Measured = "no 1-client workload A result for Causeway"
		return v
	}
	v.Evaluated = true
	v.Value = kr.Latency.P50Ms
	v.Met = v.Value <= v.Limit
	v.Measured = fmt.Sprintf("%.3f ms (%s, workload A UPDATE, p99 %.3f ms)", v.Value, res.Mode, kr.Latency.P99Ms)
	for _, m := range []string{drivers.ModeEtcdLin, drivers.ModeEtcdSer} {
		if e, ok := r.Find(m, "A", 1); ok {
			if ek := e.Kind(ycsb.OpUpdate.String()); ek.Ops > 0 {
				v.Detail = fmt.Sprintf("etcd put p50 %.3f ms, p99 %.3f ms (%s)", ek.Latency.P50Ms, ek.Latency.P99Ms, m)
				break
			}
		}
	}
	return v
}

// Evaluate fills r.Ratios and r.Targets: YCSB-A ≥ 1.5× etcd (CAUSAL vs
// serializable, the fastest read mode of each), YCSB-B and C with CAUSAL
// reads ≥ 1.5× etcd serializable, STRONG reads ≥ 1.0× etcd linearizable
// (workloads C and B), and the 1-client put latency. Throughput targets
// compare each system's peak over the client counts; Detail gives the
// ratio at every client count.
func Evaluate(r *Report) {
	r.Ratios = ComputeRatios(r)
	r.Targets = []Verdict{
		throughputTarget(r, "YCSB-A throughput ≥ 1.5× etcd (CAUSAL vs serializable)", "A", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.5),
		throughputTarget(r, "YCSB-A throughput, STRONG vs etcd linearizable (for reference)", "A", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.5),
		throughputTarget(r, "YCSB-B (CAUSAL) ≥ 1.5× etcd serializable", "B", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.5),
		throughputTarget(r, "YCSB-C (CAUSAL) ≥ 1.5× etcd serializable", "C", drivers.ModeCausewayCausal, drivers.ModeEtcdSer, 1.5),
		throughputTarget(r, "STRONG reads ≥ 1.0× etcd linearizable (YCSB-C)", "C", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0),
		throughputTarget(r, "STRONG reads ≥ 1.0× etcd linearizable (YCSB-B)", "B", drivers.ModeCausewayStrong, drivers.ModeEtcdLin, 1.0),
		PutLatencyTarget(r),
	}
}
