package faultnet

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"time"
)

// ErrPartitioned is returned when a connection is dialled across a
// partitioned link.
var ErrPartitioned = errors.New("faultnet: link is partitioned")

// Endpoint is one node.
type Endpoint struct {
	Site string
	Node string
}

func (e Endpoint) String() string { return e.Site + "/" + e.Node }

// Rule is the fault of one direction of a link. The zero Rule is a
// healthy link.
type Rule struct {
	// Down drops packets and holds stream data until the link heals.
	Down bool
	// Delay is added to every message.
	Delay time.Duration
	// Jitter adds a uniform random delay in [0, Jitter).
	Jitter time.Duration
	// Loss is the probability (0..1) that a packet is dropped, or that a
	// stream write is retransmitted (delivered RetransmitDelay later).
	Loss float64
}

// healthy reports whether r changes nothing.
func (r Rule) healthy() bool { return r == Rule{} }

// combine returns the rule of a message subject to both r and o.
func (r Rule) combine(o Rule) Rule {
	return Rule{
		Down:   r.Down || o.Down,
		Delay:  r.Delay + o.Delay,
		Jitter: r.Jitter + o.Jitter,
		Loss:   1 - (1-r.Loss)*(1-o.Loss),
	}
}

// Validate checks r.
func (r Rule) Validate() error {
	if r.Delay < 0 || r.Jitter < 0 {
		return fmt.Errorf("faultnet: negative delay %v or jitter %v", r.Delay, r.Jitter)
	}
	if r.Loss < 0 || r.Loss > 1 {
		return fmt.Errorf("faultnet: loss %v: want 0..1", r.Loss)
	}
	return nil
}

type pair[T comparable] struct{ from, to T }

// Config tunes a Net.
type Config struct {
	// Seed seeds the random choices (jitter, loss); runs with the same
	// seed and the same traffic make the same choices.
	Seed uint64
	// RetransmitDelay is the extra delay of a lost stream write.
	RetransmitDelay time.Duration
	// Linger is how long a closed connection keeps trying to deliver
	// its last writes across a link that is down.
	Linger time.Duration
	// MaxBuffered bounds the bytes a connection holds in each direction
	// before writers (or the receiving side) wait.
	MaxBuffered int
}

// DefaultConfig returns a Config with the given seed.
func DefaultConfig(seed uint64) Config {
	return Config{Seed: seed, RetransmitDelay: 200 * time.Millisecond, Linger: 5 * time.Second, MaxBuffered: 8 << 20}
}

// Net is a set of fault rules over registered endpoints. Safe for
// concurrent use.
type Net struct {
	cfg Config

	mu struct {
		sync.RWMutex
		rng     *rand.Rand
		addrs   map[string]Endpoint
		nodes   map[pair[Endpoint]]Rule
		sites   map[pair[string]]Rule
		wan     WAN                          // delays between different sites
		cuts    map[Endpoint]map[string]bool // node -> sites it is cut off from, both ways
		changed chan struct{}                // closed and replaced whenever a rule changes
	}
}

// New returns a Net with healthy links.
func New(cfg Config) *Net {
	if cfg.RetransmitDelay <= 0 {
		cfg.RetransmitDelay = DefaultConfig(0).RetransmitDelay
	}
	if cfg.Linger <= 0 {
		cfg.Linger = DefaultConfig(0).Linger
	}
	if cfg.MaxBuffered <= 0 {
		cfg.MaxBuffered = DefaultConfig(0).MaxBuffered
	}
	n := &Net{cfg: cfg}
	n.mu.rng = rand.New(rand.NewPCG(cfg.Seed, 0x6661756c746e6574))
	n.mu.addrs = map[string]Endpoint{}
	n.mu.nodes = map[pair[Endpoint]]Rule{}
	n.mu.sites = map[pair[string]]Rule{}
	n.mu.cuts = map[Endpoint]map[string]bool{}
	n.mu.changed = make(chan struct{})
	return n
}

// Register records that ep listens on addr (host:port as others dial it).
func (n *Net) Register(addr string, ep Endpoint) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.mu.addrs[addr] = ep
}

// SetRule sets the rule of messages from one node to another (the zero
// Rule clears it).
func (n *Net) SetRule(from, to Endpoint, r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	n.update(func() { setOrClear(n.mu.nodes, pair[Endpoint]{from, to}, r) })
	return nil
}

// SetSiteRule sets the rule of messages from any node of one site to any
// node of another (from == to: inside a site).
func (n *Net) SetSiteRule(from, to string, r Rule) error {
	if err := r.Validate(); err != nil {
		return err
	}
	n.update(func() { setOrClear(n.mu.sites, pair[string]{from, to}, r) })
	return nil
}

// UpdateRule changes the rule from one node to another in place.
func (n *Net) UpdateRule(from, to Endpoint, f func(*Rule)) {
	n.update(func() {
		k := pair[Endpoint]{from, to}
		r := n.mu.nodes[k]
		f(&r)
		setOrClear(n.mu.nodes, k, r)
	})
}

// UpdateSiteRule changes the rule from one site to another in place.
func (n *Net) UpdateSiteRule(from, to string, f func(*Rule)) {
	n.update(func() {
		k := pair[string]{from, to}
		r := n.mu.sites[k]
		f(&r)
		setOrClear(n.mu.sites, k, r)
	})
}

// Partition cuts both directions between a and b.
func (n *Net) Partition(a, b Endpoint) {
	n.Cut(a, b)
	n.Cut(b, a)
}

// Cut cuts the direction from one node to another (a one-way partition).
func (n *Net) Cut(from, to Endpoint) {
	n.UpdateRule(from, to, func(r *Rule) { r.Down = true })
}

// Isolate cuts both directions between ep and every other registered
// endpoint.
func (n *Net) Isolate(ep Endpoint) {
	for _, o := range n.Endpoints() {
		if o != ep {
			n.Partition(ep, o)
		}
	}
}

// PartitionSites cuts both directions between two sites.
func (n *Net) PartitionSites(a, b string) {
	n.UpdateSiteRule(a, b, func(r *Rule) { r.Down = true })
	n.UpdateSiteRule(b, a, func(r *Rule) { r.Down = true })
}

// Delay sets the delay and jitter from one node to another.
func (n *Net) Delay(from, to Endpoint, d, jitter time.Duration) {
	n.UpdateRule(from, to, func(r *Rule) { r.Delay, r.Jitter = d, jitter })
}

// DelaySites sets the delay and jitter from one site to another.
func (n *Net) DelaySites(from, to string, d, jitter time.Duration) {
	n.UpdateSiteRule(from, to, func(r *Rule) { r.Delay, r.Jitter = d, jitter })
}

// SetWAN makes w the delay of every message between nodes of two
// different sites, on top of the other rules; traffic inside a site gets
// none. It applies to sites as their nodes register, so it can be set
// before the cluster is known. The zero WAN removes it.
func (n *Net) SetWAN(w WAN) {
	n.update(func() { n.mu.wan = w })
}

// IsolateFromSite cuts both directions between self and every node of
// site, including nodes that register later.
func (n *Net) IsolateFromSite(self Endpoint, site string) {
	n.update(func() {
		if n.mu.cuts[self] == nil {
			n.mu.cuts[self] = map[string]bool{}
		}
		n.mu.cuts[self][site] = true
	})
}

// HealIsolation undoes every IsolateFromSite of self.
func (n *Net) HealIsolation(self Endpoint) {
	n.update(func() { delete(n.mu.cuts, self) })
}

// IsolatedSites returns the sites self is cut off from, sorted.
func (n *Net) IsolatedSites(self Endpoint) []string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := make([]string, 0, len(n.mu.cuts[self]))
	for site := range n.mu.cuts[self] {
		out = append(out, site)
	}
	slices.Sort(out)
	return out
}

// Heal clears every rule and every isolation from a site: all links are
// healthy again. The simulated WAN stays.
func (n *Net) Heal() {
	n.update(func() {
		clear(n.mu.nodes)
		clear(n.mu.sites)
		clear(n.mu.cuts)
	})
}

// siteOf returns the site of the node at addr ("" if not registered).
func (n *Net) siteOf(addr string) string {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return n.mu.addrs[addr].Site
}

// sites returns the sites of the registered endpoints.
func (n *Net) sites() map[string]bool {
	n.mu.RLock()
	defer n.mu.RUnlock()
	out := map[string]bool{}
	for _, ep := range n.mu.addrs {
		out[ep.Site] = true
	}
	return out
}

// Endpoints returns the registered endpoints.
func (n *Net) Endpoints() []Endpoint {
	n.mu.RLock()
	defer n.mu.RUnlock()
	seen := map[Endpoint]bool{}
	var out []Endpoint
	for _, ep := range n.mu.addrs {
		if !seen[ep] {
			seen[ep] = true
			out = append(out, ep)
		}
	}
	return out
}

func setOrClear[K comparable](m map[K]Rule, k K, r Rule) {
	if r.healthy() {
		delete(m, k)
		return
	}
	m[k] = r
}

// update runs f under the lock and wakes everything waiting on a change.
func (n *Net) update(f func()) {
	n.mu.Lock()
	defer n.mu.Unlock()
	f()
	close(n.mu.changed)
	n.mu.changed = make(chan struct{})
}

// rule returns the rule from one endpoint to the node at addr, and a
// channel closed at the next rule change. ok is false when addr is not
// registered (no faults apply).
func (n *Net) rule(from Endpoint, addr string) (r Rule, changed <-chan struct{}, ok bool) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	to, ok := n.mu.addrs[addr]
	if !ok {
		return Rule{}, n.mu.changed, false
	}
	return n.ruleLocked(from, to), n.mu.changed, true
}

// ruleFrom returns the rule from the node at addr to an endpoint.
func (n *Net) ruleFrom(addr string, to Endpoint) (Rule, <-chan struct{}) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	from, ok := n.mu.addrs[addr]
	if !ok {
		return Rule{}, n.mu.changed
	}
	return n.ruleLocked(from, to), n.mu.changed
}

// REQUIRES: n.mu
func (n *Net) ruleLocked(from, to Endpoint) Rule {
	r := n.mu.nodes[pair[Endpoint]{from, to}].combine(n.mu.sites[pair[string]{from.Site, to.Site}])
	if from.Site != to.Site {
		r = r.combine(n.mu.wan.Rule(from.Site, to.Site))
		if n.mu.cuts[from][to.Site] || n.mu.cuts[to][from.Site] {
			r.Down = true
		}
	}
	return r
}

// delay draws the delay of one message under r, and whether it is lost.
func (n *Net) delay(r Rule) (d time.Duration, lost bool) {
	d = r.Delay
	if r.Jitter <= 0 && r.Loss <= 0 {
		return d, false
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.Jitter > 0 {
		d += time.Duration(n.mu.rng.Int64N(int64(r.Jitter)))
	}
	return d, r.Loss > 0 && n.mu.rng.Float64() < r.Loss
}
