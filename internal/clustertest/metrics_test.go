package clustertest

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// gathered is a prometheus.Collector over one already-gathered metric.
type gathered struct{ m prometheus.Metric }

func (g gathered) Describe(ch chan<- *prometheus.Desc) { ch <- g.m.Desc() }
func (g gathered) Collect(ch chan<- prometheus.Metric) { ch <- g.m }

// metricVec finds the counter name (with label value lv, if any) in reg.
func metricVec(t *testing.T, reg *prometheus.Registry, name, lv string) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fams {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if lv == "" || hasLabel(m, lv) {
				return gathered{prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.CounterValue, m.GetCounter().GetValue())}
			}
		}
	}
	return gathered{prometheus.MustNewConstMetric(prometheus.NewDesc(name, "", nil, nil), prometheus.CounterValue, 0)}
}

func hasLabel(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == v {
			return true
		}
	}
	return false
}

// histogramCount returns the sample count of the histogram name (summed
// over its labels) as a collector for testutil.ToFloat64.
func histogramCount(t *testing.T, reg *prometheus.Registry, name string) prometheus.Collector {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n uint64
	for _, f := range fams {
		if f.GetName() == name {
			for _, m := range f.GetMetric() {
				n += m.GetHistogram().GetSampleCount()
			}
		}
	}
	return gathered{prometheus.MustNewConstMetric(prometheus.NewDesc(name+"_count", "", nil, nil), prometheus.CounterValue, float64(n))}
}
