package membership

import "github.com/prometheus/client_golang/prometheus"

// metrics are one Membership's Prometheus metrics.
type metrics struct {
	events            *prometheus.CounterVec
	eventsDropped     prometheus.Counter
	joinAttempts      prometheus.Counter
	joinFailures      prometheus.Counter
	reconnectAttempts prometheus.Counter
	malformedMeta     prometheus.Counter
	members           *prometheus.Desc
	membersByState    func() map[State]int

	reg        prometheus.Registerer
	registered []prometheus.Collector
}

// newMetrics creates the metrics and registers them with reg (none when
// reg is nil). membersByState is called on every scrape.
func newMetrics(reg prometheus.Registerer, membersByState func() map[State]int) (*metrics, error) {
	m := &metrics{
		events: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "events_total",
			Help: "Membership events delivered to Events, by kind (join, update, leave).",
		}, []string{"kind"}),
		eventsDropped: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "events_dropped_total",
			Help: "Events dropped because the Events channel was full (the oldest are dropped).",
		}),
		joinAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "join_attempts_total",
			Help: "Join attempts (one attempt tries every given address once).",
		}),
		joinFailures: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "join_failures_total",
			Help: "Join attempts that reached none of the given addresses.",
		}),
		reconnectAttempts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "reconnect_attempts_total",
			Help: "Attempts to rejoin a member found dead, or a seed at which no member alive gossips.",
		}),
		malformedMeta: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "causeway", Subsystem: "membership", Name: "malformed_meta_total",
			Help: "Member announcements ignored because their meta could not be decoded.",
		}),
		members: prometheus.NewDesc("causeway_membership_members",
			"Members this node knows of, by state (alive, suspect, dead, left).", []string{"state"}, nil),
		membersByState: membersByState,
		reg:            reg,
	}
	for _, k := range []EventKind{EventJoin, EventUpdate, EventLeave} {
		m.events.WithLabelValues(k.String())
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.events, m.eventsDropped, m.joinAttempts, m.joinFailures, m.reconnectAttempts, m.malformedMeta, m} {
		if err := reg.Register(c); err != nil {
			m.unregister()
			return nil, err
		}
		m.registered = append(m.registered, c)
	}
	return m, nil
}

// unregister removes every registered metric from the registerer.
func (m *metrics) unregister() {
	for _, c := range m.registered {
		m.reg.Unregister(c)
	}
	m.registered = nil
}

// Describe implements prometheus.Collector for the members gauge.
func (m *metrics) Describe(ch chan<- *prometheus.Desc) { ch <- m.members }

// Collect implements prometheus.Collector for the members gauge.
func (m *metrics) Collect(ch chan<- prometheus.Metric) {
	counts := m.membersByState()
	for _, s := range []State{StateAlive, StateSuspect, StateDead, StateLeft} {
		ch <- prometheus.MustNewConstMetric(m.members, prometheus.GaugeValue, float64(counts[s]), s.String())
	}
}
