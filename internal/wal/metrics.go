package wal

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

type metrics struct {
	commitSeconds  prometheus.Histogram
	fsyncSeconds   prometheus.Histogram
	batchEntries   prometheus.Histogram
	batchBytes     prometheus.Histogram
	relocatedBytes prometheus.Counter
}

func newMetrics(reg prometheus.Registerer, w *WAL) *metrics {
	m := &metrics{
		commitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "wal", Name: "commit_seconds",
			Help:    "Time to write and fdatasync one group commit.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "wal", Name: "fsync_seconds",
			Help:    "Time spent in one fdatasync of the log: one per group commit, several for a group commit of more than 1 MiB.",
			Buckets: prometheus.ExponentialBuckets(25e-6, 2, 16),
		}),
		batchEntries: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "wal", Name: "batch_entries",
			Help:    "Raft log entries written by one group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12),
		}),
		batchBytes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "causeway", Subsystem: "wal", Name: "batch_bytes",
			Help:    "Bytes written by one group commit.",
			Buckets: prometheus.ExponentialBuckets(64, 4, 12),
		}),
		relocatedBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "wal", Name: "relocated_bytes_total",
			Help: "Bytes of live entries copied out of the oldest segment so that it can be removed.",
		}),
	}
	if reg != nil {
		reg.MustRegister(m.commitSeconds, m.fsyncSeconds, m.batchEntries, m.batchBytes, m.relocatedBytes,
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "causeway", Subsystem: "wal", Name: "segments",
				Help: "Segment files of the write-ahead log.",
			}, func() float64 { return float64(w.segCount.Load()) }),
			prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Namespace: "causeway", Subsystem: "wal", Name: "bytes",
				Help: "Disk space of the write-ahead log's segment files, preallocation included.",
			}, func() float64 { return float64(w.diskBytes.Load()) }))
	}
	return m
}

func (m *metrics) observeBatch(entries, bytes int, d time.Duration) {
	m.commitSeconds.Observe(d.Seconds())
	m.batchEntries.Observe(float64(entries))
	m.batchBytes.Observe(float64(bytes))
}
