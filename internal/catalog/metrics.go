package catalog

import (
	"github.com/prometheus/client_golang/prometheus"
)

// metrics of the catalog and the rebalancer.
type metrics struct {
	steps    *prometheus.CounterVec
	inFlight prometheus.Gauge
	removals *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer, c *Catalog) *metrics {
	m := &metrics{
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "placement", Name: "steps_total",
			Help: "Placement steps executed by this node as catalog leader, by kind and result.",
		}, []string{"kind", "result"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "causeway", Subsystem: "placement", Name: "rebalancing",
			Help: "Placement steps in progress on this node (the catalog leader); 0 when the site is balanced.",
		}),
		removals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "catalog", Name: "node_removals_total",
			Help: "Node removals (kvctl node remove) this node decided as catalog leader, by result: ok, refused, error.",
		}, []string{"result"}),
	}
	if reg == nil {
		return m
	}
	self := c.cfg.NodeID
	reg.MustRegister(m.steps, m.inFlight, m.removals,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "causeway", Subsystem: "placement", Name: "epoch",
			Help: "Epoch of the placement map as this node sees it.",
		}, func() float64 { mp, _ := c.Map(); return float64(mp.Epoch) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "causeway", Subsystem: "placement", Name: "node_replicas",
			Help: "Shard replicas the placement map assigns to this node.",
		}, func() float64 {
			mp, _ := c.Map()
			n := 0
			for _, reps := range mp.Shards {
				for _, r := range reps {
					if string(r.Node) == self {
						n++
					}
				}
			}
			return float64(n)
		}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: "causeway", Subsystem: "catalog", Name: "is_leader",
			Help: "1 if this node leads the site catalog.",
		}, func() float64 {
			if c.IsLeader() {
				return 1
			}
			return 0
		}),
	)
	return m
}
