package faultnet

import (
	"context"
	"fmt"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
)

// Host is one node's view of a Net: it applies the rules of the messages
// the node sends (and of the replies on connections it dialled).
type Host struct {
	net     *Net
	self    Endpoint
	metrics *metrics
}

// Host returns the Host of endpoint self. reg, if not nil, receives its
// metrics.
func (n *Net) Host(self Endpoint, reg prometheus.Registerer) *Host {
	h := &Host{net: n, self: self, metrics: newMetrics(reg)}
	if reg != nil {
		reg.MustRegister(partitionCollector{h})
	}
	return h
}

// IsolateFromSite cuts both directions between this node and every node
// of site.
func (h *Host) IsolateFromSite(site string) { h.net.IsolateFromSite(h.self, site) }

// HealIsolation undoes every IsolateFromSite of this node.
func (h *Host) HealIsolation() { h.net.HealIsolation(h.self) }

// IsolatedSites returns the sites this node is cut off from, sorted.
func (h *Host) IsolatedSites() []string { return h.net.IsolatedSites(h.self) }

// Self returns the Host's endpoint.
func (h *Host) Self() Endpoint { return h.self }

// count records a message to or from the node at addr that r faulted:
// cut (the link is down), dropped (lost) or delayed.
func (h *Host) count(addr string, r Rule, d time.Duration, lost bool) {
	fault := faultDelayed
	switch {
	case r.Down:
		fault = faultCut
	case lost:
		fault = faultDropped
	case d <= 0:
		return
	}
	h.metrics.messages.WithLabelValues(h.net.siteOf(addr), fault).Inc()
}

// Register records that this Host listens on addr.
func (h *Host) Register(addr string) { h.net.Register(addr, h.self) }

// Dial connects to addr over TCP, failing with ErrPartitioned while
// either direction of the link is down, and wraps the connection. Its
// signature suits grpc.WithContextDialer.
func (h *Host) Dial(ctx context.Context, addr string) (net.Conn, error) {
	if err := h.dialable(addr); err != nil {
		return nil, err
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return h.Wrap(c, addr), nil
}

// dialable fails while a connection to addr could not be set up.
func (h *Host) dialable(addr string) error {
	out, _, ok := h.net.rule(h.self, addr)
	if !ok {
		return nil
	}
	in, _ := h.net.ruleFrom(addr, h.self)
	if out.Down || in.Down {
		h.metrics.refusedDials.Inc()
		h.count(addr, Rule{Down: true}, 0, false)
		return fmt.Errorf("%w: %s to %s", ErrPartitioned, h.self, addr)
	}
	return nil
}

// Wrap applies the link's rules to c, a connection this Host dialled to
// addr.
func (h *Host) Wrap(c net.Conn, addr string) net.Conn {
	return newConn(h, c, addr)
}

// Transport wraps memberlist's transport of this node: packets and
// dialled streams are subject to the rules.
func (h *Host) Transport(inner memberlist.NodeAwareTransport) memberlist.NodeAwareTransport {
	return &gossipTransport{NodeAwareTransport: inner, h: h}
}

// gossipTransport applies the rules to memberlist's traffic.
type gossipTransport struct {
	memberlist.NodeAwareTransport
	h *Host
}

// WriteTo implements memberlist.Transport.
func (t *gossipTransport) WriteTo(b []byte, addr string) (time.Time, error) {
	return t.WriteToAddress(b, memberlist.Address{Addr: addr})
}

// WriteToAddress implements memberlist.NodeAwareTransport: a packet is
// dropped on a link that is down or by loss, and sent later on a delayed
// one.
func (t *gossipTransport) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	r, _, ok := t.h.net.rule(t.h.self, addr.Addr)
	if !ok || r.healthy() {
		return t.NodeAwareTransport.WriteToAddress(b, addr)
	}
	d, lost := t.h.net.delay(r)
	t.h.count(addr.Addr, r, d, lost)
	if r.Down || lost {
		t.h.metrics.droppedPackets.Inc()
		return time.Now(), nil
	}
	buf := append([]byte(nil), b...)
	t.h.metrics.delayedPackets.Inc()
	time.AfterFunc(d, func() { _, _ = t.NodeAwareTransport.WriteToAddress(buf, addr) })
	return time.Now(), nil
}

// DialTimeout implements memberlist.Transport.
func (t *gossipTransport) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

// DialAddressTimeout implements memberlist.NodeAwareTransport.
func (t *gossipTransport) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	if err := t.h.dialable(addr.Addr); err != nil {
		return nil, err
	}
	c, err := t.NodeAwareTransport.DialAddressTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	return t.h.Wrap(c, addr.Addr), nil
}

// The fault label values of causeway_faultnet_messages_total.
const (
	faultDelayed = "delayed"
	faultDropped = "dropped"
	faultCut     = "cut"
)

type metrics struct {
	messages       *prometheus.CounterVec
	droppedPackets prometheus.Counter
	delayedPackets prometheus.Counter
	refusedDials   prometheus.Counter
	heldWrites     prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "causeway", Subsystem: "faultnet", Name: "messages_total",
			Help: "Messages (packets, stream writes and reads, dials) to and from a remote site that a simulated fault delayed, dropped (lost) or cut (partition)."},
			[]string{"site", "fault"}),
		droppedPackets: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "causeway", Subsystem: "faultnet", Name: "dropped_packets_total",
			Help: "Gossip packets dropped by a simulated partition or loss."}),
		delayedPackets: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "causeway", Subsystem: "faultnet", Name: "delayed_packets_total",
			Help: "Gossip packets sent late by a simulated delay."}),
		refusedDials: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "causeway", Subsystem: "faultnet", Name: "refused_dials_total",
			Help: "Connections refused across a simulated partition."}),
		heldWrites: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "causeway", Subsystem: "faultnet", Name: "faulted_writes_total",
			Help: "Stream writes delayed, retransmitted or held by a simulated fault."}),
	}
	if reg != nil {
		reg.MustRegister(m.messages, m.droppedPackets, m.delayedPackets, m.refusedDials, m.heldWrites)
	}
	return m
}

var partitionedDesc = prometheus.NewDesc("causeway_faultnet_partitioned",
	"1 while the node is cut off from every node of the site (kvctl debug partition), else 0.", []string{"site"}, nil)

// partitionCollector reports causeway_faultnet_partitioned of a Host:
// one series per known site other than its own.
type partitionCollector struct{ h *Host }

// Describe implements prometheus.Collector.
func (c partitionCollector) Describe(ch chan<- *prometheus.Desc) { ch <- partitionedDesc }

// Collect implements prometheus.Collector.
func (c partitionCollector) Collect(ch chan<- prometheus.Metric) {
	sites, cut := c.h.net.sites(), map[string]bool{}
	for _, s := range c.h.IsolatedSites() {
		sites[s], cut[s] = true, true
	}
	for s := range sites {
		if s == c.h.self.Site {
			continue
		}
		v := 0.0
		if cut[s] {
			v = 1
		}
		ch <- prometheus.MustNewConstMetric(partitionedDesc, prometheus.GaugeValue, v, s)
	}
}
