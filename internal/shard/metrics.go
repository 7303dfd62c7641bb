package shard

import (
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics exports the raft state and apply latency of every hosted group.
// A nil *Metrics is valid and records nothing.
type Metrics struct {
	proposeSeconds *prometheus.HistogramVec
	gcRemoved      *prometheus.CounterVec
	gcSkipped      *prometheus.CounterVec
	leaderChecks   prometheus.Counter
	leaseReads     prometheus.Counter
	checkedReads   prometheus.Counter
	digestChecks   *prometheus.CounterVec
	digestSeconds  prometheus.Histogram
	closes         *prometheus.CounterVec

	isLeader, term, commit, applied, snapshot, mismatch *prometheus.Desc

	mu     sync.Mutex
	groups map[*Group]struct{}
}

// NewMetrics registers the shard metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	labels := []string{"shard"}
	m := &Metrics{
		proposeSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "apply_seconds",
			Help:    "Time from proposing a command on the leader to having applied it (commit + fsync + apply).",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 16),
		}, []string{"shard", "result"}),
		gcSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "gc_passes_skipped_total",
			Help: "Garbage-collection passes a shard leader did not propose: its state held nothing to collect.",
		}, []string{"shard"}),
		gcRemoved: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "gc_removed_versions_total",
			Help: "Versions removed by garbage collection.",
		}, labels),
		leaderChecks: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "leader_checks_total",
			Help: "Leadership confirmation rounds (a quorum answers) run for STRONG reads.",
		}),
		leaseReads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "lease_reads_total",
			Help: "STRONG reads served on the leader's read lease, without a leadership confirmation round.",
		}),
		checkedReads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "leader_checked_reads_total",
			Help: "STRONG reads served after a leadership confirmation; divided by leader_checks_total it is the batching factor.",
		}),
		digestChecks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "digest_checks_total",
			Help: "Replica consistency checks concluded by this node's replica: match (every replica agreed), mismatch (some differed), incomplete (some did not answer, none differed).",
		}, []string{"shard", "result"}),
		digestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "digest_seconds",
			Help:    "Time to compute one replica digest.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18),
		}),
		closes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "shard", Name: "closes_total",
			Help: "Close commands (closed timestamps) proposed by this node's shard leaders so that followers can serve reads with newer floors, by result.",
		}, []string{"result"}),
		mismatch: prometheus.NewDesc("causeway_shard_digest_mismatch",
			"1 while this node's replica refuses reads because its digest differed from its group's at a consistency check (corrupt or suspect).", labels, nil),
		isLeader: prometheus.NewDesc("causeway_shard_is_leader", "1 if this node's replica leads the shard.", labels, nil),
		term:     prometheus.NewDesc("causeway_shard_term", "Raft term of the replica.", labels, nil),
		commit:   prometheus.NewDesc("causeway_shard_commit_index", "Raft commit index of the replica.", labels, nil),
		applied:  prometheus.NewDesc("causeway_shard_applied_index", "Last log index applied to storage.", labels, nil),
		snapshot: prometheus.NewDesc("causeway_shard_last_snapshot_index", "Index of the replica's last snapshot.", labels, nil),
		groups:   make(map[*Group]struct{}),
	}
	reg.MustRegister(m.proposeSeconds, m.gcRemoved, m.gcSkipped, m.leaderChecks, m.leaseReads, m.checkedReads, m.digestChecks, m.digestSeconds, m.closes, m)
	return m
}

func (m *Metrics) add(g *Group) {
	// The garbage-collection counters start at zero for every hosted shard:
	// a site whose leaders found nothing to collect yet still exports them,
	// and rate() over them reads 0 rather than no data.
	m.gcRemoved.WithLabelValues(g.label)
	m.gcSkipped.WithLabelValues(g.label)
	m.mu.Lock()
	m.groups[g] = struct{}{}
	m.mu.Unlock()
}

func (m *Metrics) remove(g *Group) {
	m.mu.Lock()
	delete(m.groups, g)
	m.mu.Unlock()
}

func (m *Metrics) observePropose(shard, result string, d time.Duration) {
	if m != nil {
		m.proposeSeconds.WithLabelValues(shard, result).Observe(d.Seconds())
	}
}

func (m *Metrics) observeClose(ok bool) {
	if m != nil {
		if ok {
			m.closes.WithLabelValues("ok").Inc()
		} else {
			m.closes.WithLabelValues("error").Inc()
		}
	}
}

func (m *Metrics) observeLeaderCheck(reads int) {
	if m != nil {
		m.leaderChecks.Inc()
		m.checkedReads.Add(float64(reads))
	}
}

func (m *Metrics) observeLeaseRead() {
	if m != nil {
		m.leaseReads.Inc()
	}
}

func (m *Metrics) observeGC(shard string, removed int) {
	if m != nil {
		m.gcRemoved.WithLabelValues(shard).Add(float64(removed))
	}
}

func (m *Metrics) observeGCSkipped(shard string) {
	if m != nil {
		m.gcSkipped.WithLabelValues(shard).Inc()
	}
}

func (m *Metrics) observeCheck(shard, result string) {
	if m != nil {
		m.digestChecks.WithLabelValues(shard, result).Inc()
	}
}

func (m *Metrics) observeDigest(d time.Duration) {
	if m != nil {
		m.digestSeconds.Observe(d.Seconds())
	}
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.isLeader, m.term, m.commit, m.applied, m.snapshot, m.mismatch} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.mu.Lock()
	groups := make([]*Group, 0, len(m.groups))
	for g := range m.groups {
		groups = append(groups, g)
	}
	m.mu.Unlock()
	for _, g := range groups {
		st := g.Status()
		leader := 0.0
		if g.raft.State() == raft.Leader {
			leader = 1
		}
		gauge := func(d *prometheus.Desc, v float64) {
			ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, g.label)
		}
		gauge(m.isLeader, leader)
		gauge(m.term, float64(st.Term))
		gauge(m.commit, float64(st.CommitIndex))
		gauge(m.applied, float64(st.AppliedIndex))
		gauge(m.snapshot, float64(st.LastSnapshotIndex))
		refused := 0.0
		if g.Corrupt() {
			refused = 1
		}
		gauge(m.mismatch, refused)
	}
}
