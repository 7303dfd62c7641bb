package core

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// heartbeats is a causeway_transport_rpc_seconds histogram of heartbeats
// with the given cumulative counts up to 1, 2 and 4 ms, and their sum.
func heartbeats(le1, le2, le4 int, sum float64) string {
	return fmt.Sprintf(`# HELP causeway_transport_rpc_seconds Latency of raft RPCs sent to peers, by type.
# TYPE causeway_transport_rpc_seconds histogram
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.001"} %d
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.002"} %d
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="0.004"} %d
causeway_transport_rpc_seconds_bucket{type="heartbeat",le="+Inf"} %d
causeway_transport_rpc_seconds_sum{type="heartbeat"} %g
causeway_transport_rpc_seconds_count{type="heartbeat"} %d
`, le1, le2, le4, le4, sum, le4)
}

var (
	earlier    = heartbeats(10, 10, 10, 0.005)
	exposition = heartbeats(10, 30, 40, 0.06) + `# TYPE causeway_storage_commit_batch_size histogram
causeway_storage_commit_batch_size_bucket{db="raft",le="1"} 5
causeway_storage_commit_batch_size_bucket{db="raft",le="2"} 5
causeway_storage_commit_batch_size_bucket{db="raft",le="+Inf"} 5
causeway_storage_commit_batch_size_sum{db="raft"} 5
causeway_storage_commit_batch_size_count{db="raft"} 5
# TYPE causeway_shard_apply_seconds histogram
causeway_shard_apply_seconds_bucket{shard="default/1",result="ok",le="+Inf"} 3
causeway_shard_apply_seconds_sum{shard="default/1",result="ok"} 0
causeway_shard_apply_seconds_count{shard="default/1",result="ok"} 3
causeway_shard_apply_seconds_bucket{shard="default/2",result="ok",le="+Inf"} 4
causeway_shard_apply_seconds_sum{shard="default/2",result="ok"} 0.7
causeway_shard_apply_seconds_count{shard="default/2",result="ok"} 4
# TYPE causeway_other_total counter
causeway_other_total{a="b\"c"} 12 1700000000
`
)

func parse(t *testing.T, node, text string) NodeMetrics {
	t.Helper()
	n, err := ParseMetrics(node, strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestParseMetricsAndDiff(t *testing.T) {
	after := Snapshot{parse(t, "n1", exposition)}
	before := Snapshot{parse(t, "n1", earlier)}
	byName := map[string]HistDelta{}
	for _, d := range Diff(before, after) {
		byName[d.Name+" "+d.Label] = d
	}
	hb := byName["causeway_transport_rpc_seconds type=heartbeat"]
	// 30 new observations: 20 in (1ms, 2ms], 10 in (2ms, 4ms].
	if hb.Count != 30 || math.Abs(hb.Mean-0.055/30) > 1e-12 {
		t.Errorf("heartbeat %+v", hb)
	}
	if math.Abs(hb.P50-0.00175) > 1e-9 || math.Abs(hb.P90-0.0034) > 1e-9 {
		t.Errorf("heartbeat p50 %.6f p90 %.6f, want 0.00175 and 0.0034", hb.P50, hb.P90)
	}
	bs := byName["causeway_storage_commit_batch_size db=raft"]
	if bs.Count != 5 || bs.P50 != 1 || bs.P99 != 1 || bs.Mean != 1 {
		t.Errorf("batch size %+v (the lowest bucket's quantiles are its bound)", bs)
	}
	ap := byName["causeway_shard_apply_seconds result=ok"]
	if ap.Count != 7 || math.Abs(ap.Mean-0.1) > 1e-12 {
		t.Errorf("apply summed over shards: %+v", ap)
	}
	if len(byName) != 3 {
		t.Errorf("deltas %v", byName)
	}
	// Two nodes are summed.
	two := Diff(nil, Snapshot{parse(t, "n1", earlier), parse(t, "n2", earlier)})
	if len(two) != 1 || two[0].Count != 20 {
		t.Errorf("two nodes: %+v", two)
	}
	if _, err := ParseMetrics("x", strings.NewReader("broken{a=\"x\" 1\n")); err == nil {
		t.Error("unterminated labels accepted")
	}
}

// TestCommitStats: storage commits per node and database between two
// gathers of real registries, the write-ahead log as db "wal", the mean
// propose→applied time and the forwarding hops.
func TestCommitStats(t *testing.T) {
	type node struct {
		reg                    *prometheus.Registry
		commit, batch, wal, we *prometheus.HistogramVec
		apply                  prometheus.Histogram
		reqs                   prometheus.Counter
	}
	mk := func() *node {
		n := &node{reg: prometheus.NewRegistry()}
		n.commit = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_storage_commit_seconds"}, []string{"db"})
		n.batch = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_storage_commit_batch_size"}, []string{"db"})
		n.wal = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_wal_commit_seconds"}, nil)
		n.we = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_wal_batch_entries"}, nil)
		n.apply = prometheus.NewHistogram(prometheus.HistogramOpts{Name: "causeway_shard_apply_seconds"})
		n.reqs = prometheus.NewCounter(prometheus.CounterOpts{Name: "causeway_rpc_requests_total"})
		n.reg.MustRegister(n.commit, n.batch, n.wal, n.we, n.apply, n.reqs)
		return n
	}
	n1, n2 := mk(), mk()
	gs := []NodeGatherer{{Node: "n1", Gatherer: n1.reg}, {Node: "n2", Gatherer: n2.reg}}
	n1.commit.WithLabelValues("state").Observe(1) // before: not counted
	n1.reqs.Add(5)
	before, err := Gather(gs)
	if err != nil {
		t.Fatal(err)
	}
	for range 4 { // n1 state: 4 commits of 2 updates, 10 ms each
		n1.commit.WithLabelValues("state").Observe(0.010)
		n1.batch.WithLabelValues("state").Observe(2)
	}
	for range 2 { // n2 wal: 2 commits of 6 entries, 5 ms each
		n2.wal.WithLabelValues().Observe(0.005)
		n2.we.WithLabelValues().Observe(6)
	}
	n1.apply.Observe(0.002)
	n2.apply.Observe(0.004)
	n1.reqs.Add(10)
	n2.reqs.Add(5) // 15 requests served for 10 client requests
	after, err := Gather(gs)
	if err != nil {
		t.Fatal(err)
	}
	s := CommitStats(before, after, 2)
	s.SetForwards(10)
	if s.Commits != 6 || s.CommitsPerSec != 3 || math.Abs(s.MeanBatch-10.0/3) > 1e-9 || math.Abs(s.MeanCommitMs-50.0/6) > 1e-9 {
		t.Errorf("totals %+v", s)
	}
	if math.Abs(s.MeanProposeMs-3) > 1e-9 || s.Requests != 15 || math.Abs(s.ForwardsPerOp-0.5) > 1e-9 {
		t.Errorf("propose %.3f ms, requests %d, forwards %.2f", s.MeanProposeMs, s.Requests, s.ForwardsPerOp)
	}
	want := []string{"n1/state 4 2.0 10.00 0.02", "n2/wal 2 6.0 5.00 0.01"}
	var got []string
	for _, d := range s.DBs {
		got = append(got, fmt.Sprintf("%s/%s %d %.1f %.2f %.2f", d.Node, d.DB, d.Commits, d.MeanBatch, d.MeanCommitMs, d.Busy))
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("per db %q, want %q", got, want)
	}
}

// TestScrape reads a registry over HTTP, as from a kvd's /metrics.
func TestScrape(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "causeway_transport_rpc_seconds", Buckets: []float64{0.001, 0.01}}, []string{"type"})
	reg.MustRegister(h)
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	before, err := Scrape(context.Background(), []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h.WithLabelValues("append").Observe(0.005)
	after, err := Scrape(context.Background(), []string{srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	d := Diff(before, after)
	if len(d) != 1 || d[0].Label != "type=append" || d[0].Count != 1 || d[0].P50 <= 0.001 || d[0].P50 > 0.01 {
		t.Errorf("diff %+v", d)
	}
	bad := httptest.NewServer(http.NotFoundHandler())
	defer bad.Close()
	if _, err := Scrape(context.Background(), []string{bad.URL}); err == nil {
		t.Error("a 404 was accepted")
	}
}
