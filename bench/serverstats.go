package bench

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// ServerStats summarizes the embedded server's storage commits during one
// phase (warmup included), read from its metrics registry. It shows how
// well writes were group-committed: each commit costs the disk's sync
// latency, so puts/s is bounded by commits/s × updates per commit.
type ServerStats struct {
	Commits       uint64  `json:"commits"`
	CommitsPerSec float64 `json:"commits_per_sec"`
	MeanBatch     float64 `json:"mean_batch"`
	MeanCommitMs  float64 `json:"mean_commit_ms"`
	// MeanProposeMs is the mean time from raft proposal to applied.
	MeanProposeMs float64 `json:"mean_propose_ms"`
}

// metricTotals are cumulative histogram totals at one instant.
type metricTotals struct {
	commitCount, batchCount  uint64
	commitSum, batchSum      float64
	proposeCount, proposeSum float64
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

func gatherTotals(g prometheus.Gatherer) (metricTotals, bool) {
	if g == nil {
		return metricTotals{}, false
	}
	fams, err := g.Gather()
	if err != nil {
		return metricTotals{}, false
	}
	var t metricTotals
	t.commitCount, t.commitSum = histTotals(fams, "causeway_storage_commit_seconds")
	t.batchCount, t.batchSum = histTotals(fams, "causeway_storage_commit_batch_size")
	pc, ps := histTotals(fams, "causeway_shard_apply_seconds")
	t.proposeCount, t.proposeSum = float64(pc), ps
	return t, true
}

func diffStats(a, b metricTotals, seconds float64) *ServerStats {
	s := &ServerStats{Commits: b.commitCount - a.commitCount}
	if s.Commits > 0 {
		s.MeanCommitMs = (b.commitSum - a.commitSum) / float64(s.Commits) * 1000
	}
	if n := b.batchCount - a.batchCount; n > 0 {
		s.MeanBatch = (b.batchSum - a.batchSum) / float64(n)
	}
	if n := b.proposeCount - a.proposeCount; n > 0 {
		s.MeanProposeMs = (b.proposeSum - a.proposeSum) / n * 1000
	}
	if seconds > 0 {
		s.CommitsPerSec = float64(s.Commits) / seconds
	}
	return s
}
