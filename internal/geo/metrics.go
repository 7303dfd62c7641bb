package geo

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the chains' metrics (docs/operations.md).
type Metrics struct {
	lagSeconds, lagEntries *prometheus.GaugeVec
	outboundBytes          prometheus.Gauge
	oldestUnstable         prometheus.Gauge
	applied                *prometheus.CounterVec
	superseded             prometheus.Counter
	depWaitSec             prometheus.Histogram
	depsRemote             prometheus.Counter
	skips, rejoins         *prometheus.CounterVec
	aeRuns                 *prometheus.CounterVec
	aeKeys                 prometheus.Counter
	aeSec                  prometheus.Histogram
	shipped                *prometheus.CounterVec
	batches                *prometheus.CounterVec
	pipelined, resent      *prometheus.CounterVec
	shipSec                prometheus.Histogram
	stabilitySec           prometheus.Histogram
	rtt                    *prometheus.GaugeVec
	unreachable            prometheus.Gauge
	rebuilt                *prometheus.CounterVec
	joiningShards          prometheus.Gauge
}

func newMetrics() *Metrics {
	o := func(name, help string) prometheus.Opts {
		return prometheus.Opts{Namespace: "causeway", Subsystem: "geo", Name: name, Help: help}
	}
	return &Metrics{
		lagSeconds: prometheus.NewGaugeVec(prometheus.GaugeOpts(o("replication_lag_seconds",
			"Age (by HLC) of the oldest update this node's shard leaders still have to get applied at a site, per destination site.")), []string{"site"}),
		lagEntries: prometheus.NewGaugeVec(prometheus.GaugeOpts(o("replication_lag_entries",
			"Updates this node's shard leaders still have to get applied at a site, per destination site.")), []string{"site"}),
		outboundBytes: prometheus.NewGauge(prometheus.GaugeOpts(o("outbound_log_bytes",
			"Size of the outbound logs of the shards this node leads."))),
		oldestUnstable: prometheus.NewGauge(prometheus.GaugeOpts(o("oldest_unstable_seconds",
			"Age (by HLC) of the oldest write of this site, in the shards this node leads, not yet applied at every site of its chain."))),
		applied: prometheus.NewCounterVec(prometheus.CounterOpts(o("remote_updates_applied_total",
			"Updates of other sites applied here, per origin site.")), []string{"origin"}),
		superseded: prometheus.NewCounter(prometheus.CounterOpts(o("lww_superseded_total",
			"Remote or repaired versions that arrived older than their key's newest version (last-writer-wins kept the newer)."))),
		depWaitSec: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "causeway", Subsystem: "geo", Name: "dependency_wait_seconds",
			Help:    "Time a remote update waited for the updates it depends on to be applied at this site.",
			Buckets: prometheus.ExponentialBuckets(1e-4, 2, 16)}),
		depsRemote: prometheus.NewCounter(prometheus.CounterOpts(o("dependencies_remote_checks_total",
			"Dependencies of remote updates on shards this node holds no replica of, checked on the node of this site that leads them."))),
		skips: prometheus.NewCounterVec(prometheus.CounterOpts(o("chain_skips_total",
			"Times a shipper skipped an unreachable site of its chain, per skipped site.")), []string{"site"}),
		rejoins: prometheus.NewCounterVec(prometheus.CounterOpts(o("chain_rejoins_total",
			"Times a skipped site was reached again and took its place in the chain back, per site.")), []string{"site"}),
		aeRuns: prometheus.NewCounterVec(prometheus.CounterOpts(o("anti_entropy_runs_total",
			"Anti-entropy comparisons of a shard with another site, by result.")), []string{"result"}),
		aeKeys: prometheus.NewCounter(prometheus.CounterOpts(o("anti_entropy_keys_repaired_total",
			"Newest versions sent to other sites by anti-entropy."))),
		aeSec: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "causeway", Subsystem: "geo", Name: "anti_entropy_seconds",
			Help: "Duration of one anti-entropy run of a shard towards a site.", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		shipped: prometheus.NewCounterVec(prometheus.CounterOpts(o("shipped_updates_total",
			"Updates shipped to the next site of a chain, per destination site.")), []string{"site"}),
		batches: prometheus.NewCounterVec(prometheus.CounterOpts(o("ship_batches_total",
			"Ship calls to the next site of a chain (batches, heartbeats), per destination site and result.")), []string{"site", "result"}),
		pipelined: prometheus.NewCounterVec(prometheus.CounterOpts(o("ship_pipelined_total",
			"Batches shipped to the next site of a chain while an earlier batch of the same stream was still unanswered, per destination site.")), []string{"site"}),
		resent: prometheus.NewCounterVec(prometheus.CounterOpts(o("ship_window_resets_total",
			"Times a shipper dropped its batches in flight (an error, or an answer behind what was sent) and went on from the destination's acknowledged progress, per destination site.")), []string{"site"}),
		shipSec: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "causeway", Subsystem: "geo", Name: "ship_seconds",
			Help: "Round trip of a shipped batch, applied at the receiving site.", Buckets: prometheus.ExponentialBuckets(1e-3, 2, 14)}),
		stabilitySec: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: "causeway", Subsystem: "geo", Name: "stability_seconds",
			Help:    "Time from a write of this site to its global stability (applied at every site of its chain), for the newest write each time a shard's stable point advances.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 2, 16)}),
		unreachable: prometheus.NewGauge(prometheus.GaugeOpts(o("unreachable_sites",
			"Other sites this node has not reached for three ping rounds; the site catalog moves shard leadership off a node that reaches fewer sites than another replica of the shard."))),
		rtt: prometheus.NewGaugeVec(prometheus.GaugeOpts(o("site_rtt_seconds",
			"Last measured round trip to a site (ping through the peer API).")), []string{"site"}),
		joiningShards: prometheus.NewGauge(prometheus.GaugeOpts(o("joining_shards",
			"Shards this node leads, of keyspaces this site was added to after their creation, that still wait for another site's join repair; the site refuses reads of such a keyspace until the sum over its nodes is 0 for it."))),
		rebuilt: prometheus.NewCounterVec(prometheus.CounterOpts(o("rebuilt_replicas_total",
			"Times a shard leader found that a site's replica had lost writes of that site (it numbered writes again from a sequence already applied elsewhere) and had it repaired whole, per site whose replica it was.")), []string{"site"}),
	}
}

// NewMetrics registers the chains' metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := newMetrics()
	reg.MustRegister(m.lagSeconds, m.lagEntries, m.outboundBytes, m.oldestUnstable, m.applied, m.superseded,
		m.depWaitSec, m.depsRemote, m.skips, m.rejoins, m.aeRuns, m.aeKeys, m.aeSec, m.shipped, m.batches, m.pipelined, m.resent, m.shipSec, m.stabilitySec, m.rtt, m.unreachable, m.rebuilt, m.joiningShards)
	return m
}
