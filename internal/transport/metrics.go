package transport

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/status"
)

// RPC types, the "type" label of the metrics.
const (
	typeAppendEntries  = "append_entries"
	typeHeartbeat      = "heartbeat"
	typePipeline       = "append_entries_pipeline"
	typeRequestVote    = "request_vote"
	typeRequestPreVote = "request_pre_vote"
	typeTimeoutNow     = "timeout_now"
	typeSnapshot       = "install_snapshot"
)

// metrics are the transport's Prometheus metrics.
type metrics struct {
	sent          *prometheus.CounterVec
	received      *prometheus.CounterVec
	sentBytes     *prometheus.CounterVec
	receivedBytes *prometheus.CounterVec
	snapshotBytes *prometheus.CounterVec
	dialErrors    prometheus.Counter
	rpcSeconds    *prometheus.HistogramVec
}

// newMetrics creates the metrics and registers them with reg (if not nil).
func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "rpcs_sent_total",
			Help: "Raft RPCs sent to peers (pipelined AppendEntries counted one by one), by type and gRPC status code.",
		}, []string{"type", "result"}),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "rpcs_received_total",
			Help: "Raft RPCs received from peers, by type and gRPC status code.",
		}, []string{"type", "result"}),
		sentBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "sent_bytes_total",
			Help: "Encoded size of the raft messages sent (requests and responses), by RPC type.",
		}, []string{"type"}),
		receivedBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "received_bytes_total",
			Help: "Encoded size of the raft messages received (requests and responses), by RPC type.",
		}, []string{"type"}),
		snapshotBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "snapshot_bytes_total",
			Help: "Snapshot data streamed by InstallSnapshot, by direction (sent, received).",
		}, []string{"direction"}),
		dialErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "dial_errors_total",
			Help: "Failed attempts to connect to a peer.",
		}),
		rpcSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "rpc_seconds",
			Help:    "Latency of raft RPCs sent to peers, by type.",
			Buckets: prometheus.ExponentialBuckets(100e-6, 2, 18),
		}, []string{"type"}),
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.received, m.sentBytes, m.receivedBytes, m.snapshotBytes, m.dialErrors, m.rpcSeconds)
	}
	return m
}

// observeSent records one RPC sent: its outcome, latency and the sizes of
// the request sent and the response received.
func (m *metrics) observeSent(typ string, start time.Time, reqBytes, respBytes int, err error) {
	m.sent.WithLabelValues(typ, resultOf(err)).Inc()
	m.rpcSeconds.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	m.sentBytes.WithLabelValues(typ).Add(float64(reqBytes))
	m.receivedBytes.WithLabelValues(typ).Add(float64(respBytes))
}

// observeReceived records one RPC received and answered with err (a
// status).
func (m *metrics) observeReceived(typ string, reqBytes, respBytes int, err error) {
	m.received.WithLabelValues(typ, resultOf(err)).Inc()
	m.receivedBytes.WithLabelValues(typ).Add(float64(reqBytes))
	m.sentBytes.WithLabelValues(typ).Add(float64(respBytes))
}

// resultOf is the "result" label of an RPC that ended with err: its gRPC
// status code.
func resultOf(err error) string { return status.Code(toStatus(err)).String() }
