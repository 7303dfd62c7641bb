package rpc

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// Metrics counts requests by operation and status code and times them.
// Routing decisions (forwards, follower reads, floor waits) are counted by
// router.Metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	tokenSize *prometheus.HistogramVec
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
	m.tokenSize = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "causeway", Subsystem: "rpc", Name: "session_token_bytes",
		Help:    "Size of the session tokens of client requests (in) and replies (out).",
		Buckets: prometheus.ExponentialBuckets(16, 2, 13),
	}, []string{"direction"})
	reg.MustRegister(m.requests, m.latency, m.tokenSize)
	return m
}

func (m *Metrics) observe(op string, start time.Time, err *error) {
	m.latency.WithLabelValues(op).Observe(time.Since(start).Seconds())
	m.requests.WithLabelValues(op, status.Code(*err).String()).Inc()
}
