package storage

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	bolt "go.etcd.io/bbolt"
)

type metrics struct {
	commitSeconds prometheus.Histogram
	batchSize     prometheus.Histogram
	openTxReads   prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, b *bolt.DB, name string, reqIdx *reqIndexes) *metrics {
	labels := prometheus.Labels{"db": name}
	m := &metrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "storage", Name: "commit_seconds",
			Help:        "Time to commit (and fsync, unless the database is derived) one transaction.",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(50e-6, 2, 16),
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "storage", Name: "commit_batch_size",
			Help:        "Updates committed together in one transaction.",
			ConstLabels: labels,
			Buckets:     prometheus.ExponentialBuckets(1, 2, 13),
		}),
		openTxReads: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "storage", Name: "open_tx_reads_total",
			Help:        "Shard reads served from the open transaction of deferred commits (their shard had applies not yet committed).",
			ConstLabels: labels,
		}),
	}
	if reg != nil {
		reg.MustRegister(m.commitSeconds, m.batchSize, m.openTxReads,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "causeway", Subsystem: "storage", Name: "bytes",
				Help:        "Size of the database file in bytes.",
				ConstLabels: labels,
			}, func() float64 {
				var n int64
				_ = b.View(func(tx *bolt.Tx) error { n = tx.Size(); return nil })
				return float64(n)
			}),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "causeway", Subsystem: "storage", Name: "request_ids",
				Help:        "Request ids held in the in-memory indexes of the shard replicas (one per write remembered for deduplication).",
				ConstLabels: labels,
			}, func() float64 { return float64(reqIdx.size()) }))
	}
	return m
}

func (m *metrics) observeCommit(n int, d time.Duration) {
	m.commitSeconds.Observe(d.Seconds())
	m.batchSize.Observe(float64(n))
}
