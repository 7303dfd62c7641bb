package core

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// NodeMetrics are one node's metric families at one instant.
type NodeMetrics struct {
	Node     string
	Families []*dto.MetricFamily
}

// Snapshot is the metrics of a site's nodes at one instant, read from
// their registries in this process (Gather) or from their /metrics
// endpoints (Scrape).
type Snapshot []NodeMetrics

// NodeGatherer is one in-process node's metrics registry.
type NodeGatherer struct {
	Node string
	prometheus.Gatherer
}

// Gather reads every registry; it fails if any gather does.
func Gather(gs []NodeGatherer) (Snapshot, error) {
	var s Snapshot
	for _, g := range gs {
		fams, err := g.Gather()
		if err != nil {
			return nil, fmt.Errorf("gather %s: %w", g.Node, err)
		}
		s = append(s, NodeMetrics{Node: g.Node, Families: fams})
	}
	return s, nil
}

// Scrape fetches every URL's Prometheus text exposition (for example
// http://127.0.0.1:7380/metrics); each is one node, named by its URL.
func Scrape(ctx context.Context, urls []string) (Snapshot, error) {
	var s Snapshot
	for _, u := range urls {
		n, err := scrapeOne(ctx, u)
		if err != nil {
			return nil, fmt.Errorf("scrape %s: %w", u, err)
		}
		s = append(s, n)
	}
	return s, nil
}

func scrapeOne(ctx context.Context, url string) (NodeMetrics, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return NodeMetrics{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return NodeMetrics{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return NodeMetrics{}, fmt.Errorf("HTTP %s", resp.Status)
	}
	return ParseMetrics(url, resp.Body)
}

// ParseMetrics reads one node's Prometheus text exposition.
func ParseMetrics(node string, r io.Reader) (NodeMetrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return NodeMetrics{}, err
	}
	n := NodeMetrics{Node: node}
	for _, name := range slices.Sorted(maps.Keys(fams)) {
		n.Families = append(n.Families, fams[name])
	}
	return n, nil
}

// hist is one histogram summed over nodes and collapsed labels.
type hist struct {
	buckets map[float64]float64 // upper bound -> cumulative count; +Inf included
	count   float64
	sum     float64
}

func (h *hist) add(m *dto.Histogram, sign float64) {
	count := float64(m.GetSampleCount()) + m.GetSampleCountFloat()
	h.count += sign * count
	h.sum += sign * m.GetSampleSum()
	for _, b := range m.GetBucket() {
		if !math.IsInf(b.GetUpperBound(), 1) {
			h.buckets[b.GetUpperBound()] += sign * (float64(b.GetCumulativeCount()) + b.GetCumulativeCountFloat())
		}
	}
	h.buckets[math.Inf(1)] += sign * count
}

// seriesKey is a histogram series: the node ("" when summed over nodes)
// and the value of the label it is broken down by.
type seriesKey struct{ node, label string }

// histograms sums the histograms called name by the value of label
// (everything together when label is empty), per node when perNode, into
// into with the given sign (+1, or -1 to subtract an earlier snapshot).
func (s Snapshot) histograms(into map[seriesKey]*hist, name, label string, perNode bool, sign float64) {
	for _, n := range s {
		for _, f := range n.Families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				h := m.GetHistogram()
				if h == nil {
					continue
				}
				k := seriesKey{}
				if perNode {
					k.node = n.Node
				}
				for _, lp := range m.GetLabel() {
					if label != "" && lp.GetName() == label {
						k.label = lp.GetValue()
					}
				}
				if into[k] == nil {
					into[k] = &hist{buckets: map[float64]float64{}}
				}
				into[k].add(h, sign)
			}
		}
	}
}

// delta returns the histograms called name observed between before and
// after, by label value (and node when perNode).
func delta(before, after Snapshot, name, label string, perNode bool) map[seriesKey]*hist {
	out := map[seriesKey]*hist{}
	after.histograms(out, name, label, perNode, 1)
	before.histograms(out, name, label, perNode, -1)
	return out
}

// counter sums the counters called name over every node and label.
func (s Snapshot) counter(name string) (sum float64) {
	for _, n := range s {
		for _, f := range n.Families {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue() + m.GetUntyped().GetValue()
			}
		}
	}
	return sum
}

// quantile interpolates linearly inside the bucket holding quantile q, as
// Prometheus's histogram_quantile does, except that a quantile in the lowest
// bucket is that bucket's upper bound (not interpolated from 0, which would
// put half of a batch-size histogram's ones at 0.5) and one in the +Inf
// bucket is the highest finite bound; 0 when empty.
func (h *hist) quantile(q float64) float64 {
	les := make([]float64, 0, len(h.buckets))
	for le := range h.buckets {
		les = append(les, le)
	}
	slices.Sort(les)
	if len(les) == 0 {
		return 0
	}
	total := h.buckets[les[len(les)-1]]
	if total <= 0 {
		return 0
	}
	rank := q * total
	prevLe, prevC := 0.0, 0.0
	for i, le := range les {
		c := h.buckets[le]
		if c >= rank && c > 0 {
			switch {
			case math.IsInf(le, 1):
				return prevLe
			case i == 0 || c == prevC:
				return le
			}
			return prevLe + (le-prevLe)*(rank-prevC)/(c-prevC)
		}
		prevLe, prevC = le, c
	}
	return prevLe
}

// ServerHistograms are the Causeway server histograms a YCSB run reports,
// each with the label it is broken down by (the others, such as the shard,
// are summed over, as are the nodes).
var ServerHistograms = []struct {
	Name string
	By   string
}{
	{"causeway_transport_rpc_seconds", "type"},
	{"causeway_storage_commit_batch_size", "db"},
	{"causeway_storage_commit_seconds", "db"},
	{"causeway_shard_apply_seconds", "result"},
}

// HistDelta summarises one server histogram over a phase: observations,
// mean and interpolated quantiles (histogram_quantile style), in the
// histogram's unit (seconds or a count).
type HistDelta struct {
	Name  string  `json:"name"`
	Label string  `json:"label"` // e.g. "type=AppendEntries"
	Count float64 `json:"count"`
	Mean  float64 `json:"mean"`
	P50   float64 `json:"p50"`
	P90   float64 `json:"p90"`
	P99   float64 `json:"p99"`
}

// Diff returns ServerHistograms' observations between before and after,
// summed over the nodes, sorted by name and label, leaving out those
// without any.
func Diff(before, after Snapshot) []HistDelta {
	var out []HistDelta
	for _, sh := range ServerHistograms {
		for k, d := range delta(before, after, sh.Name, sh.By, false) {
			if d.count <= 0 {
				continue
			}
			out = append(out, HistDelta{
				Name: sh.Name, Label: sh.By + "=" + k.label, Count: d.count, Mean: d.sum / d.count,
				P50: d.quantile(0.5), P90: d.quantile(0.9), P99: d.quantile(0.99),
			})
		}
	}
	slices.SortFunc(out, func(x, y HistDelta) int {
		if c := strings.Compare(x.Name, y.Name); c != 0 {
			return c
		}
		return strings.Compare(x.Label, y.Label)
	})
	return out
}

// ServerStats summarizes a site's storage commits during one phase
// (warm-up included), summed over its nodes. It shows how well writes were
// group-committed: each commit costs the disk's sync latency, so puts/s is
// bounded by commits/s × updates per commit (divided by the replicas that
// each commit a put).
type ServerStats struct {
	Commits       uint64  `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	MeanBatch     float64 `json:"mean_batch"`
	MeanCommitMs  float64 `json:"mean_commit_ms"`
	// MeanProposeMs is the mean time from raft proposal to applied.
	MeanProposeMs float64 `json:"mean_propose_ms"`
	// Requests counts the KV requests the nodes served, summed over the
	// site: the clients' requests plus every hop a node forwarded to
	// another node (to a shard's leader, or to a replica it lacks).
	Requests uint64 `json:"requests"`
	// ForwardsPerOp is (Requests − client requests) / client requests:
	// how many extra hops an operation took on average.
	ForwardsPerOp float64 `json:"forwards_per_op"`
	// DBs breaks the commits down per node and database (a node has a
	// write-ahead log for the raft logs, "wal", and the "raft" and
	// "state" databases, each with one committer).
	DBs []DBStats `json:"dbs,omitempty"`
}

// DBStats is one database's group commits during a phase.
type DBStats struct {
	Node          string  `json:"node"`
	DB            string  `json:"db"`
	Commits       uint64  `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	MeanBatch     float64 `json:"mean_batch"`
	MeanCommitMs  float64 `json:"mean_commit_ms"`
	// Busy is the fraction of the phase its committer spent committing.
	Busy float64 `json:"busy"`
}

// SetForwards derives ForwardsPerOp from the phase's client requests.
func (s *ServerStats) SetForwards(clientRequests int64) {
	if s == nil || clientRequests <= 0 {
		return
	}
	s.ForwardsPerOp = max(float64(s.Requests)-float64(clientRequests), 0) / float64(clientRequests)
}

// CommitStats returns the storage commits between before and after, which
// lie seconds apart.
func CommitStats(before, after Snapshot, seconds float64) *ServerStats {
	type dbDelta struct{ commits, batches *hist }
	dbs := map[seriesKey]*dbDelta{}
	collect := func(name, label, db string, batches bool) {
		for k, h := range delta(before, after, name, label, true) {
			if db != "" { // the write-ahead log has no db label
				k.label = db
			}
			d := dbs[k]
			if d == nil {
				d = &dbDelta{}
				dbs[k] = d
			}
			if batches {
				d.batches = h
			} else {
				d.commits = h
			}
		}
	}
	collect("causeway_storage_commit_seconds", "db", "", false)
	collect("causeway_storage_commit_batch_size", "db", "", true)
	collect("causeway_wal_commit_seconds", "", "wal", false)
	collect("causeway_wal_batch_entries", "", "wal", true)

	s := &ServerStats{}
	var commitSum, batchSum, batchCount float64
	for k, d := range dbs {
		db := DBStats{Node: k.node, DB: k.label}
		if c := d.commits; c != nil && c.count > 0 {
			db.Commits = uint64(c.count + 0.5)
			db.MeanCommitMs = c.sum / c.count * 1000
			commitSum += c.sum
			if seconds > 0 {
				db.Busy = c.sum / seconds
			}
		}
		if b := d.batches; b != nil && b.count > 0 {
			db.MeanBatch = b.sum / b.count
			batchSum += b.sum
			batchCount += b.count
		}
		if seconds > 0 {
			db.CommitsPerSec = float64(db.Commits) / seconds
		}
		s.Commits += db.Commits
		s.DBs = append(s.DBs, db)
	}
	sort.Slice(s.DBs, func(i, j int) bool {
		x, y := s.DBs[i], s.DBs[j]
		if x.Node != y.Node {
			return NodeLess(x.Node, y.Node)
		}
		return x.DB < y.DB
	})
	if s.Commits > 0 {
		s.MeanCommitMs = commitSum / float64(s.Commits) * 1000
	}
	if batchCount > 0 {
		s.MeanBatch = batchSum / batchCount
	}
	for _, p := range delta(before, after, "causeway_shard_apply_seconds", "", false) {
		if p.count > 0 {
			s.MeanProposeMs = p.sum / p.count * 1000
		}
	}
	if r := after.counter("causeway_rpc_requests_total") - before.counter("causeway_rpc_requests_total"); r > 0 {
		s.Requests = uint64(r + 0.5)
	}
	if seconds > 0 {
		s.CommitsPerSec = float64(s.Commits) / seconds
	}
	return s
}

// NodeLess orders node ids so that n2 comes before n10.
func NodeLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
