package router

import "github.com/prometheus/client_golang/prometheus"

// Metrics counts routing decisions.
type Metrics struct {
	forwarded      prometheus.Counter
	unanswered     prometheus.Counter
	localReads     *prometheus.CounterVec
	floorWaits     prometheus.Counter
	floorWaitSec   *prometheus.HistogramVec
	depWaitSec     prometheus.Histogram
	depsUnchecked  prometheus.Counter
	durableWaitSec prometheus.Histogram
	moves          *prometheus.CounterVec
	moveWaitSec    prometheus.Histogram
	txns           *prometheus.CounterVec
	txnStaleness   prometheus.Histogram
	casFailFast    *prometheus.CounterVec
	joinRefusals   prometheus.Counter
}

func newMetrics() *Metrics {
	return &Metrics{
		forwarded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "forwarded_total",
			Help: "Requests (or parts of scans and batches) forwarded to another node of the site.",
		}),
		unanswered: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "forwards_unanswered_total",
			Help: "Forwarded requests ended because their node stopped answering (a ping got no answer) and routed again.",
		}),
		localReads: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "local_reads_total",
			Help: "CAUSAL reads served by this node's replica, by its role (leader or follower).",
		}, []string{"role"}),
		floorWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "floor_forwards_total",
			Help: "CAUSAL reads a follower could not serve within the follower wait (it had not applied the session's floor) and forwarded to the leader.",
		}),
		floorWaitSec: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "router", Name: "floor_wait_seconds",
			Help:    "Time a CAUSAL read waited for this node's replica to apply the session's floor, by outcome (served, forwarded, timeout). Reads that needed no wait are not counted.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 16),
		}, []string{"outcome"}),
		depWaitSec: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "router", Name: "dependency_wait_seconds",
			Help:    "Time a write waited for this site to apply other sites' writes it depends on. Writes that needed no wait are not counted.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}),
		depsUnchecked: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "router", Name: "dependencies_unchecked_total",
			Help: "Dependencies on other sites' writes to shards this node holds no replica of, left to the chain of sites to check.",
		}),
		durableWaitSec: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "router", Name: "durability_wait_seconds",
			Help:    "Time a SITES(n) or ALL write waited, after committing here, for the first sites of its chain to apply it.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16),
		}),
		moves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "router", Name: "session_moves_total",
			Help: "Requests of sessions last served at another site, by outcome: arrived (this site had applied their causal past, after a wait) or timeout (ErrSessionMoved).",
		}, []string{"outcome"}),
		moveWaitSec: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "router", Name: "session_move_wait_seconds",
			Help:    "Time a session arriving from another site waited for this site to apply its causal past.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2, 18),
		}),
		txns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "router", Name: "gettxn_shards_total",
			Help: "Shards read by GetTxn snapshots, by where (local: this node's replica; forwarded: another node of the site, in the same round).",
		}, []string{"where"}),
		casFailFast: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "router", Name: "cas_fail_fast_total",
			Help: "Version-conditioned compare-and-swaps answered with a conflict without a log entry, by when: newer (this leader already held a newer version) or after_turn (after waiting for a swap of the same key that expected the same version).",
		}, []string{"when"}),
		joinRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "router", Name: "join_refusals_total",
			Help: "Reads and compare-and-swaps refused (UNAVAILABLE) because their keyspace is joining this site: a shard still waits for another site's join repair.",
		}),
		txnStaleness: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "router", Name: "gettxn_staleness_seconds",
			Help:    "Age of a GetTxn snapshot when it was read (the node's clock minus the snapshot's HLC).",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2, 18),
		}),
	}
}

// NewMetrics registers the routing metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := newMetrics()
	reg.MustRegister(m.forwarded, m.unanswered, m.localReads, m.floorWaits, m.floorWaitSec, m.depWaitSec, m.depsUnchecked, m.durableWaitSec,
		m.moves, m.moveWaitSec, m.txns, m.txnStaleness, m.casFailFast, m.joinRefusals)
	return m
}

func (m *Metrics) localRead(leader bool) {
	if leader {
		m.localReads.WithLabelValues("leader").Inc()
	} else {
		m.localReads.WithLabelValues("follower").Inc()
	}
}
