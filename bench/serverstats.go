package bench

import (
	"sort"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ServerStats summarizes the embedded servers' storage commits during one
// phase (warmup included), read from their metrics registries and summed
// over the nodes of the site. It shows how well writes were
// group-committed: each commit costs the disk's sync latency, so puts/s
// is bounded by commits/s × updates per commit (divided by the replicas
// that each commit a put).
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
	// raft log database and a state database, each with one committer).
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

// setForwards derives ForwardsPerOp from the phase's client requests.
func (s *ServerStats) setForwards(clientRequests int64) {
	if s == nil || clientRequests <= 0 {
		return
	}
	s.ForwardsPerOp = max(float64(s.Requests)-float64(clientRequests), 0) / float64(clientRequests)
}

// NodeGatherer is one node's metrics registry.
type NodeGatherer struct {
	Node string
	prometheus.Gatherer
}

// dbTotals are one database's cumulative commit histogram totals.
type dbTotals struct {
	commitCount, batchCount uint64
	commitSum, batchSum     float64
}

// metricTotals are cumulative totals at one instant, summed over nodes.
type metricTotals struct {
	dbs                      map[[2]string]dbTotals // by node, db label
	proposeCount, proposeSum float64
	requests                 float64
}

func histTotals(fams []*dto.MetricFamily, name string) (count uint64, sum float64) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if h := m.GetHistogram(); h != nil {
				count += h.GetSampleCount()
				sum += h.GetSampleSum()
			}
		}
	}
	return count, sum
}

// histByLabel is histTotals per value of label.
func histByLabel(fams []*dto.MetricFamily, name, label string, fn func(value string, count uint64, sum float64)) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			h := m.GetHistogram()
			if h == nil {
				continue
			}
			value := ""
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label {
					value = lp.GetValue()
				}
			}
			fn(value, h.GetSampleCount(), h.GetSampleSum())
		}
	}
}

func counterTotal(fams []*dto.MetricFamily, name string) (sum float64) {
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if c := m.GetCounter(); c != nil {
				sum += c.GetValue()
			}
		}
	}
	return sum
}

// gatherTotals sums the totals over every node; ok is false when there is
// no node or a gather fails.
func gatherTotals(gs []NodeGatherer) (t metricTotals, ok bool) {
	if len(gs) == 0 {
		return metricTotals{}, false
	}
	t.dbs = map[[2]string]dbTotals{}
	for _, g := range gs {
		fams, err := g.Gather()
		if err != nil {
			return metricTotals{}, false
		}
		histByLabel(fams, "causeway_storage_commit_seconds", "db", func(db string, c uint64, s float64) {
			d := t.dbs[[2]string{g.Node, db}]
			d.commitCount, d.commitSum = d.commitCount+c, d.commitSum+s
			t.dbs[[2]string{g.Node, db}] = d
		})
		histByLabel(fams, "causeway_storage_commit_batch_size", "db", func(db string, c uint64, s float64) {
			d := t.dbs[[2]string{g.Node, db}]
			d.batchCount, d.batchSum = d.batchCount+c, d.batchSum+s
			t.dbs[[2]string{g.Node, db}] = d
		})
		// The raft log's write-ahead log (docs/adr/008), reported as db "wal".
		histByLabel(fams, "causeway_wal_commit_seconds", "", func(_ string, c uint64, s float64) {
			d := t.dbs[[2]string{g.Node, "wal"}]
			d.commitCount, d.commitSum = d.commitCount+c, d.commitSum+s
			t.dbs[[2]string{g.Node, "wal"}] = d
		})
		histByLabel(fams, "causeway_wal_batch_entries", "", func(_ string, c uint64, s float64) {
			d := t.dbs[[2]string{g.Node, "wal"}]
			d.batchCount, d.batchSum = d.batchCount+c, d.batchSum+s
			t.dbs[[2]string{g.Node, "wal"}] = d
		})
		c, sum := histTotals(fams, "causeway_shard_apply_seconds")
		t.proposeCount, t.proposeSum = t.proposeCount+float64(c), t.proposeSum+sum
		t.requests += counterTotal(fams, "causeway_rpc_requests_total")
	}
	return t, true
}

func diffStats(a, b metricTotals, seconds float64) *ServerStats {
	s := &ServerStats{}
	var commitSum, batchSum float64
	var batchCount uint64
	for key, bd := range b.dbs {
		ad := a.dbs[key]
		d := DBStats{Node: key[0], DB: key[1], Commits: bd.commitCount - ad.commitCount}
		cs := bd.commitSum - ad.commitSum
		s.Commits += d.Commits
		commitSum += cs
		if d.Commits > 0 {
			d.MeanCommitMs = cs / float64(d.Commits) * 1000
		}
		if n := bd.batchCount - ad.batchCount; n > 0 {
			d.MeanBatch = (bd.batchSum - ad.batchSum) / float64(n)
			batchCount += n
			batchSum += bd.batchSum - ad.batchSum
		}
		if seconds > 0 {
			d.CommitsPerSec = float64(d.Commits) / seconds
			d.Busy = cs / seconds
		}
		s.DBs = append(s.DBs, d)
	}
	sort.Slice(s.DBs, func(i, j int) bool {
		x, y := s.DBs[i], s.DBs[j]
		if x.Node != y.Node {
			return nodeLess(x.Node, y.Node)
		}
		return x.DB < y.DB
	})
	if s.Commits > 0 {
		s.MeanCommitMs = commitSum / float64(s.Commits) * 1000
	}
	if batchCount > 0 {
		s.MeanBatch = batchSum / float64(batchCount)
	}
	if n := b.proposeCount - a.proposeCount; n > 0 {
		s.MeanProposeMs = (b.proposeSum - a.proposeSum) / n * 1000
	}
	if r := b.requests - a.requests; r > 0 {
		s.Requests = uint64(r + 0.5)
	}
	if seconds > 0 {
		s.CommitsPerSec = float64(s.Commits) / seconds
	}
	return s
}

// nodeLess orders node ids so that n2 comes before n10.
func nodeLess(a, b string) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	return a < b
}
