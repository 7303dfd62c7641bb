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
	typeCommitPush     = "commit_push"
	typeBatch          = "append_entries_batch"   // one AppendEntriesBatch RPC
	typeBatched        = "append_entries_batched" // one request carried in a batch
	typeKeepalive      = "keepalive"              // a quiet group's heartbeat, carried in a batch
	typeQuiet          = "append_entries_quiet"   // raft's request answered by keepalives
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
	// quietWaits counts the times a leader's raft replication to a
	// follower started waiting without a timer (quiet.go); quietWaiting
	// is how many wait now.
	quietWaits   prometheus.Counter
	quietWaiting prometheus.Gauge
	// quietWakes counts the quiet waits the keepalives ended, by reason
	// (see quietWake*).
	quietWakes *prometheus.CounterVec
	// leaseRefusals counts votes and transfers refused to keep read
	// leases (lease.go), by reason.
	leaseRefusals *prometheus.CounterVec
	// incarnationRefusals counts requests refused as coming from a node
	// of another incarnation of the site (incarnation.go).
	incarnationRefusals prometheus.Counter
	// byType holds every type's series for an RPC that succeeded, looked
	// up once: every raft message passes here. Read-only after newMetrics.
	byType map[string]*typeSeries
}

// typeSeries are the series of one RPC type with result OK.
type typeSeries struct {
	sent, received, sentBytes, receivedBytes prometheus.Counter
	seconds                                  prometheus.Observer
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
		quietWaits: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "quiet_waits_total",
			Help: "Times a leader's raft replication to a follower started waiting without a timer, the follower kept in contact by keepalives.",
		}),
		quietWaiting: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "quiet_followers",
			Help: "Followers of groups this node leads whose raft replication waits without a timer, kept in contact by keepalives.",
		}),
		quietWakes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "quiet_wakes_total",
			Help: "Quiet waits of leaders' raft replication the keepalives ended, by reason: no_contact (no keepalive answered within two intervals), refused (a keepalive failed, was refused or answered from a newer term), log_lost (answered by a follower whose log no longer holds what it acknowledged: raft sends it its log again).",
		}, []string{"reason"}),
		leaseRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "lease_refusals_total",
			Help: "Requests refused to keep leaders' read leases: vote_held (a vote within the promise after this node started), stale_transfer (a leadership transfer of an older term), log_held (a vote, asked or to grant, of a replica whose log lacks entries its state applied: it lost them on disk).",
		}, []string{"reason"}),
		incarnationRefusals: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "transport", Name: "incarnation_refusals_total",
			Help: "Requests refused because the sender belongs to another incarnation of this site (a node that lost its data and bootstrapped a new site at an address the other knows): raft requests of the site's groups, forwarded requests and peer calls.",
		}),
	}
	m.byType = make(map[string]*typeSeries)
	ok := resultOf(nil)
	for _, typ := range []string{typeAppendEntries, typeHeartbeat, typePipeline, typeCommitPush, typeBatch, typeBatched, typeKeepalive, typeQuiet, typeRequestVote, typeRequestPreVote, typeTimeoutNow, typeSnapshot} {
		m.byType[typ] = &typeSeries{
			sent: m.sent.WithLabelValues(typ, ok), received: m.received.WithLabelValues(typ, ok),
			sentBytes: m.sentBytes.WithLabelValues(typ), receivedBytes: m.receivedBytes.WithLabelValues(typ),
			seconds: m.rpcSeconds.WithLabelValues(typ),
		}
	}
	if reg != nil {
		reg.MustRegister(m.sent, m.received, m.sentBytes, m.receivedBytes, m.snapshotBytes, m.dialErrors, m.rpcSeconds, m.quietWaits, m.quietWaiting, m.quietWakes, m.leaseRefusals, m.incarnationRefusals)
	}
	return m
}

// observeSent records one RPC sent: its outcome, latency and the sizes of
// the request sent and the response received.
func (m *metrics) observeSent(typ string, start time.Time, reqBytes, respBytes int, err error) {
	if t := m.byType[typ]; t != nil && err == nil {
		t.sent.Inc()
		t.seconds.Observe(time.Since(start).Seconds())
		t.sentBytes.Add(float64(reqBytes))
		t.receivedBytes.Add(float64(respBytes))
		return
	}
	m.sent.WithLabelValues(typ, resultOf(err)).Inc()
	m.rpcSeconds.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	m.sentBytes.WithLabelValues(typ).Add(float64(reqBytes))
	m.receivedBytes.WithLabelValues(typ).Add(float64(respBytes))
}

// observeReceived records one RPC received and answered with err (a
// status).
func (m *metrics) observeReceived(typ string, reqBytes, respBytes int, err error) {
	if t := m.byType[typ]; t != nil && err == nil {
		t.received.Inc()
		t.receivedBytes.Add(float64(reqBytes))
		t.sentBytes.Add(float64(respBytes))
		return
	}
	m.received.WithLabelValues(typ, resultOf(err)).Inc()
	m.receivedBytes.WithLabelValues(typ).Add(float64(reqBytes))
	m.sentBytes.WithLabelValues(typ).Add(float64(respBytes))
}

// resultOf is the "result" label of an RPC that ended with err: its gRPC
// status code.
func resultOf(err error) string { return status.Code(toStatus(err)).String() }
