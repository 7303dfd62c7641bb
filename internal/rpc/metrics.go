package rpc

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics counts requests by operation and status code and times them.
// Routing decisions (forwards, follower reads, floor waits) are counted by
// router.Metrics.
type Metrics struct {
	requests  *prometheus.CounterVec
	latency   *prometheus.HistogramVec
	tokenSize *prometheus.HistogramVec
	tokenIn   prometheus.Observer
	tokenOut  prometheus.Observer
	streams   prometheus.Gauge // open KV.Stream call streams
	ops       sync.Map         // op name → *opMetrics
}

// opMetrics are the children of one operation that every successful
// request updates, resolved once instead of per request.
type opMetrics struct {
	latency prometheus.Observer
	ok      prometheus.Counter
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
	m.tokenIn, m.tokenOut = m.tokenSize.WithLabelValues("in"), m.tokenSize.WithLabelValues("out")
	m.streams = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "causeway", Subsystem: "rpc", Name: "call_streams",
		Help: "Open KV.Stream call streams (about one per client connection); their calls count in requests_total by operation.",
	})
	reg.MustRegister(m.requests, m.latency, m.tokenSize, m.streams)
	return m
}

func (m *Metrics) observe(op string, start time.Time, err *error) {
	om, ok := m.ops.Load(op)
	if !ok {
		om, _ = m.ops.LoadOrStore(op, &opMetrics{latency: m.latency.WithLabelValues(op), ok: m.requests.WithLabelValues(op, codes.OK.String())})
	}
	o := om.(*opMetrics)
	o.latency.Observe(time.Since(start).Seconds())
	if *err == nil {
		o.ok.Inc()
		return
	}
	m.requests.WithLabelValues(op, status.Code(*err).String()).Inc()
}
