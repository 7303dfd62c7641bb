package rpc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// Metrics counts requests by operation and status code and times them.
type Metrics struct {
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	forwarded  prometheus.Counter
	localReads *prometheus.CounterVec
	floorWaits prometheus.Counter
}

// NewMetrics registers the request metrics with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "requests_total",
			Help: "Client requests served, by operation and gRPC status code.",
		}, []string{"op", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "rpc", Name: "request_seconds",
			Help:    "Client request latency, by operation.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18),
		}, []string{"op"}),
	}
	m.forwarded = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "causeway", Subsystem: "rpc", Name: "forwarded_total",
		Help: "Requests (or parts of scans and batches) forwarded to another node of the site.",
	})
	m.localReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "causeway", Subsystem: "rpc", Name: "local_reads_total",
		Help: "CAUSAL reads served by this node's replica, by its role (leader or follower).",
	}, []string{"role"})
	m.floorWaits = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "causeway", Subsystem: "rpc", Name: "floor_forwards_total",
		Help: "CAUSAL reads a follower could not serve within the follower wait (it had not applied the session's floor) and forwarded to the leader.",
	})
	reg.MustRegister(m.requests, m.latency, m.forwarded, m.localReads, m.floorWaits)
	return m
}

func (m *Metrics) followerRead(leader bool) {
	if leader {
		m.localReads.WithLabelValues("leader").Inc()
	} else {
		m.localReads.WithLabelValues("follower").Inc()
	}
}

func (m *Metrics) observe(op string, start time.Time, err *error) {
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(op, status.Code(*err).String()).Inc()
}
