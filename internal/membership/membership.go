package membership

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-db/causeway/internal/logging"
)

// Membership is one node's gossip membership. Its methods are safe for
// concurrent use.
type Membership struct {
	cfg       Config
	name      string
	log       *slog.Logger
	metrics   *metrics
	retention time.Duration // how long dead and left members are reported

	// Set once by New, read-only afterwards.
	ml     *memberlist.Memberlist
	events chan Event // sent to and closed only under mu

	// intro reads memberlist's node states (see internals.go); nil if
	// this memberlist version's layout is unknown. Stored after
	// memberlist.Create returns, read by the callbacks.
	intro atomic.Pointer[introspector]

	// life serializes Leave, UpdateMeta and Shutdown: memberlist's Leave
	// panics after its Shutdown.
	life sync.Mutex

	// mu guards the view built from memberlist's callbacks. Lock order:
	// memberlist's node lock (held around every callback), then mu.
	mu struct {
		sync.Mutex
		meta    []byte // encoded local Meta, returned by NodeMeta
		peers   map[string]*peer
		left    bool                    // Leave was called
		stopped bool                    // Shutdown was called; events is closed
		failed  map[string]failedMember // dead members to rejoin, by name
		seeds   []string                // addresses to rejoin while no member alive gossips there
	}

	// The reconnector's goroutine (reconnect.go) ends when stop closes.
	stop        chan struct{}
	reconnected sync.WaitGroup
}

// peer is what the callbacks recorded about one member.
type peer struct {
	member Member    // State is alive, dead or left
	since  time.Time // when it became dead or left
}

// New starts gossip on cfg.BindAddr. The node is alone until Join. It
// registers its metrics with reg (none if reg is nil) and logs to logger
// (memberlist's own log lines included, at their level).
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	meta, err := cfg.Meta.MarshalBinary()
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	m := &Membership{cfg: cfg, name: cfg.Meta.Name(), log: logger}
	m.mu.meta = meta
	m.mu.peers = make(map[string]*peer)
	m.mu.failed = make(map[string]failedMember)
	m.mu.seeds = dedupe(cfg.Seeds)
	m.stop = make(chan struct{})
	m.events = make(chan Event, cfg.EventBuffer)
	m.metrics, err = newMetrics(reg, m.countByState)
	if err != nil {
		return nil, fmt.Errorf("membership: register metrics: %w", err)
	}

	mc := cfg.memberlistConfig()
	d := &delegate{m: m}
	mc.Delegate = d
	mc.Events = d
	mlog := logger.With("component", "memberlist")
	mc.Logger = log.New(&strangerFilter{out: logging.Writer(mlog), log: mlog, interval: time.Minute}, "", 0)
	m.retention = mc.GossipToTheDeadTime
	if cfg.WrapTransport != nil {
		nt, err := newNetTransport(mc)
		if err != nil {
			m.metrics.unregister()
			return nil, fmt.Errorf("membership: start gossip on %s: %w", cfg.BindAddr, err)
		}
		mc.Transport = cfg.WrapTransport(nt)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		if mc.Transport != nil {
			_ = mc.Transport.Shutdown()
		}
		m.metrics.unregister()
		return nil, fmt.Errorf("membership: start gossip on %s: %w", cfg.BindAddr, err)
	}
	m.ml = ml
	if in := newIntrospector(ml); in != nil {
		m.intro.Store(in)
	} else {
		logger.Warn("membership: cannot read memberlist's node states; suspect members will be reported alive and members that left dead")
	}
	m.reconnected.Add(1)
	go m.reconnectLoop()
	logger.Info("membership: gossip started", "node", m.name, "gossip_addr", m.Local().GossipAddr, "profile", cfg.Profile)
	return m, nil
}

// Join contacts addrs (gossip host:port of existing members) and merges
// state with every one that answers. It retries, waiting JoinBackoff,
// doubling up to JoinMaxBackoff, until at least one address answered or
// ctx ends (then the error wraps ErrJoin and ctx.Err()). It returns how
// many addresses answered in the successful attempt. A contact in flight
// is not interrupted: Join may return up to TCPTimeout after ctx ends.
func (m *Membership) Join(ctx context.Context, addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, fmt.Errorf("%w: no addresses given", ErrJoin)
	}
	backoff := m.cfg.JoinBackoff
	var lastErr error
	for {
		if m.closed() {
			return 0, ErrClosed
		}
		if err := ctx.Err(); err != nil {
			return 0, joinError(err, lastErr)
		}
		m.metrics.joinAttempts.Inc()
		n, err := m.joinOnce(ctx, addrs)
		if n > 0 {
			m.log.Info("membership: joined", "contacted", n, "addrs", addrs)
			return n, nil
		}
		lastErr = err
		m.metrics.joinFailures.Inc()
		wait := backoff/2 + rand.N(backoff/2+1)
		m.log.Warn("membership: join failed; retrying", "addrs", addrs, "err", err, "retry_in", wait)
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return 0, joinError(ctx.Err(), lastErr)
		case <-t.C:
		}
		backoff = min(2*backoff, m.cfg.JoinMaxBackoff)
	}
}

// TryJoin contacts each of addrs once, all at once, and merges state with
// every one that answers, without retrying: it returns how many answered,
// or an error wrapping ErrJoin when none did. It takes up to TCPTimeout
// (an address whose host is down).
func (m *Membership) TryJoin(addrs []string) (int, error) {
	if len(addrs) == 0 {
		return 0, fmt.Errorf("%w: no addresses given", ErrJoin)
	}
	if m.closed() {
		return 0, ErrClosed
	}
	m.metrics.joinAttempts.Inc()
	var (
		wg       sync.WaitGroup
		answered atomic.Int64
		errs     = make([]error, len(addrs))
	)
	for i, a := range addrs {
		wg.Go(func() {
			k, err := m.ml.Join([]string{a})
			answered.Add(int64(k))
			errs[i] = err
		})
	}
	wg.Wait()
	n, err := int(answered.Load()), errors.Join(errs...)
	if n > 0 {
		m.log.Info("membership: joined", "contacted", n, "addrs", addrs)
		return n, nil
	}
	m.metrics.joinFailures.Inc()
	return 0, fmt.Errorf("%w: %v", ErrJoin, err)
}

// SetSeeds replaces the addresses the reconnector tries while no member
// alive gossips at them (Config.Seeds at first). Duplicates are dropped.
func (m *Membership) SetSeeds(addrs []string) {
	seeds := dedupe(addrs)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !slices.Equal(seeds, m.mu.seeds) {
		m.log.Info("membership: seeds", "addrs", seeds)
	}
	m.mu.seeds = seeds
}

// ReconnectInterval is how often the reconnector tries the members found
// dead and the seeds (Config.ReconnectInterval or the profile's).
func (m *Membership) ReconnectInterval() time.Duration { return m.cfg.reconnectInterval() }

// Seeds returns the addresses the reconnector tries while no member alive
// gossips at them.
func (m *Membership) Seeds() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.mu.seeds)
}

// dedupe returns addrs without empty strings and repeats, in order.
func dedupe(addrs []string) []string {
	var out []string
	for _, a := range addrs {
		if a != "" && !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// joinOnce tries each address once, stopping early if ctx ends.
func (m *Membership) joinOnce(ctx context.Context, addrs []string) (int, error) {
	total := 0
	var errs []error
	for _, a := range addrs {
		if ctx.Err() != nil {
			break
		}
		n, err := m.ml.Join([]string{a})
		total += n
		if err != nil {
			errs = append(errs, err)
		}
	}
	return total, errors.Join(errs...)
}

func joinError(ctxErr, last error) error {
	if last == nil {
		return fmt.Errorf("%w: %w", ErrJoin, ctxErr)
	}
	return fmt.Errorf("%w: %w (last error: %v)", ErrJoin, ctxErr, last)
}

// Members returns every member this node knows of, itself included,
// sorted by name: alive and suspect members, and dead and left ones for
// GossipToTheDeadTime after they died or left (as long as memberlist keeps
// them). Members whose meta could not be decoded are not included.
func (m *Membership) Members() []Member {
	var states map[string]memberlist.NodeStateType
	if in := m.intro.Load(); in != nil {
		states = in.states()
	}
	now := time.Now()
	m.mu.Lock()
	m.pruneLocked(now)
	out := make([]Member, 0, len(m.mu.peers))
	for name, p := range m.mu.peers {
		mem := p.member
		if mem.State == StateAlive && states[name] == memberlist.StateSuspect {
			mem.State = StateSuspect
		}
		if mem.State == StateDead || mem.State == StateLeft {
			mem.DownSince = p.since
		}
		out = append(out, mem)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Member) int { return strings.Compare(a.Name(), b.Name()) })
	return out
}

// countByState counts Members by state, for the members gauge.
func (m *Membership) countByState() map[State]int {
	counts := make(map[State]int, 4)
	for _, mem := range m.Members() {
		counts[mem.State]++
	}
	return counts
}

// Local returns this node as the others see it (alive, or left after
// Leave), with the gossip address actually bound.
func (m *Membership) Local() Member {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.mu.peers[m.name]; ok {
		return p.member
	}
	// Only before memberlist announced us, which Create does.
	return Member{Meta: m.cfg.Meta, State: StateAlive}
}

// Events returns the channel of membership events, in the order memberlist
// reported them, this node's own join first. It is buffered (EventBuffer);
// memberlist's callbacks never wait for the reader: when the buffer is
// full the oldest event is dropped (and counted), so a reader that falls
// behind should resynchronize from Members. The channel is closed by
// Shutdown.
func (m *Membership) Events() <-chan Event { return m.events }

// UpdateMeta announces a new Meta for this node. Its Site and NodeID must
// not change. The others see an EventUpdate. It waits until the update is
// handed to another member or ctx's deadline (LeaveTimeout without one)
// passes; the local Meta is updated either way.
func (m *Membership) UpdateMeta(ctx context.Context, meta Meta) error {
	if meta.Site != m.cfg.Meta.Site || meta.NodeID != m.cfg.Meta.NodeID {
		return fmt.Errorf("%w: site and node id cannot change (have %s, got %s)", ErrInvalidMeta, m.name, meta.Name())
	}
	b, err := meta.MarshalBinary()
	if err != nil {
		return err
	}
	m.life.Lock()
	defer m.life.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.left || m.mu.stopped {
		m.mu.Unlock()
		return ErrClosed
	}
	m.mu.meta = b
	m.mu.Unlock()
	if err := m.ml.UpdateNode(m.timeout(ctx)); err != nil {
		return fmt.Errorf("membership: broadcast meta update: %w", err)
	}
	return nil
}

// Leave announces that this node leaves, so the others report it left
// rather than dead, and waits until the announcement is handed to another
// member or ctx's deadline (LeaveTimeout without one) passes
// (ErrLeaveTimeout). The node keeps gossiping until Shutdown; Leave twice
// is a no-op.
func (m *Membership) Leave(ctx context.Context) error {
	m.life.Lock()
	defer m.life.Unlock()
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	if m.mu.stopped {
		m.mu.Unlock()
		return ErrClosed
	}
	m.mu.left = true
	m.mu.Unlock()
	if err := m.ml.Leave(m.timeout(ctx)); err != nil {
		return fmt.Errorf("%w: %v", ErrLeaveTimeout, err)
	}
	m.log.Info("membership: left", "node", m.name)
	return nil
}

// Shutdown stops gossip without announcing it (call Leave first to leave
// gracefully): the others will find this node dead. It closes the Events
// channel and unregisters the metrics. memberlist's goroutines have all
// been told to stop when it returns and exit within moments. Shutdown
// twice is a no-op.
func (m *Membership) Shutdown() error {
	m.life.Lock()
	defer m.life.Unlock()
	m.mu.Lock()
	if m.mu.stopped {
		m.mu.Unlock()
		return nil
	}
	m.mu.stopped = true
	m.mu.Unlock()
	close(m.stop)
	m.reconnected.Wait()

	err := m.ml.Shutdown()

	m.mu.Lock()
	close(m.events)
	m.mu.Unlock()
	m.metrics.unregister()
	if err != nil {
		return fmt.Errorf("membership: shut down gossip: %w", err)
	}
	m.log.Info("membership: gossip stopped", "node", m.name)
	return nil
}

// timeout converts ctx's deadline to memberlist's timeout; LeaveTimeout
// when ctx has none.
func (m *Membership) timeout(ctx context.Context) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		return max(time.Until(dl), time.Millisecond)
	}
	return m.cfg.LeaveTimeout
}

func (m *Membership) closed() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.mu.left || m.mu.stopped
}

// pruneLocked forgets members that have been dead or left for longer than
// memberlist keeps them. This node is never forgotten.
// REQUIRES: m.mu.
func (m *Membership) pruneLocked(now time.Time) {
	for name, p := range m.mu.peers {
		if name != m.name && (p.member.State == StateDead || p.member.State == StateLeft) && now.Sub(p.since) > m.retention {
			delete(m.mu.peers, name)
		}
	}
}

// emitLocked queues e on the events channel, dropping the oldest queued
// event if the channel is full. memberlist serializes its callbacks, and
// they are the only senders, so the retry after dropping one succeeds.
// REQUIRES: m.mu.
func (m *Membership) emitLocked(e Event) {
	if m.mu.stopped {
		return
	}
	m.metrics.events.WithLabelValues(e.Kind.String()).Inc()
	for range 2 {
		select {
		case m.events <- e:
			return
		default:
		}
		select {
		case <-m.events:
			m.metrics.eventsDropped.Inc()
		default:
		}
	}
	m.metrics.eventsDropped.Inc()
}

// delegate receives memberlist's callbacks. memberlist calls NotifyJoin,
// NotifyUpdate and NotifyLeave while holding its node lock, so the Node
// they get may be read; none of the methods blocks on anything but mu.
type delegate struct{ m *Membership }

var (
	_ memberlist.Delegate      = (*delegate)(nil)
	_ memberlist.EventDelegate = (*delegate)(nil)
)

// NodeMeta implements memberlist.Delegate. The encoding is at most
// MaxMetaSize bytes, within limit.
func (d *delegate) NodeMeta(limit int) []byte {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	return d.m.mu.meta
}

// NotifyMsg, GetBroadcasts, LocalState and MergeRemoteState implement
// memberlist.Delegate; this package sends no user data.
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

// NotifyJoin implements memberlist.EventDelegate.
func (d *delegate) NotifyJoin(n *memberlist.Node) { d.alive(n, EventJoin) }

// NotifyUpdate implements memberlist.EventDelegate.
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.alive(n, EventUpdate) }

// alive records that n joined or updated its meta. A member whose meta
// does not decode, or names another node, is ignored (logged and
// counted); one that had a valid meta keeps it.
func (d *delegate) alive(n *memberlist.Node, kind EventKind) {
	m := d.m
	var meta Meta
	err := meta.UnmarshalBinary(n.Meta)
	if err == nil && meta.Name() != n.Name {
		err = fmt.Errorf("%w: meta names %q", ErrMalformedMeta, meta.Name())
	}
	addr := n.Address()
	if err != nil {
		m.metrics.malformedMeta.Inc()
		m.log.Warn("membership: ignoring member with malformed meta", "member", n.Name, "gossip_addr", addr, "event", kind.String(), "err", err)
		if kind == EventJoin {
			m.mu.Lock()
			delete(m.mu.peers, n.Name)
			m.mu.Unlock()
		}
		return
	}
	mem := Member{Meta: meta, State: StateAlive, GossipAddr: addr}
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.mu.peers[n.Name]; !ok || p.member.State != StateAlive {
		kind = EventJoin // first valid meta, or back from dead
	}
	m.mu.peers[n.Name] = &peer{member: mem}
	delete(m.mu.failed, n.Name)
	m.emitLocked(Event{Kind: kind, Member: mem})
	m.log.Debug("membership: member "+kind.String(), "member", n.Name, "gossip_addr", addr)
}

// NotifyLeave implements memberlist.EventDelegate.
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	m := d.m
	state := StateDead
	if in := m.intro.Load(); in != nil {
		// n.State is always StateAlive; see internals.go.
		if s, ok := in.stateLocked(n.Name); ok && s == memberlist.StateLeft {
			state = StateLeft
		}
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pruneLocked(now)
	p, ok := m.mu.peers[n.Name]
	if !ok {
		return // never had a valid meta
	}
	p.member.State = state
	p.member.GossipAddr = n.Address()
	p.since = now
	if state == StateDead && n.Name != m.name {
		m.mu.failed[n.Name] = failedMember{addr: p.member.GossipAddr, since: now}
	}
	m.emitLocked(Event{Kind: EventLeave, Member: p.member})
	m.log.Info("membership: member "+state.String(), "member", n.Name)
}

// newNetTransport binds memberlist's own UDP/TCP transport for mc, as
// memberlist.Create does when it is given none (retrying a port 0 bind,
// which can collide between the two protocols), and sets mc's ports to
// the bound one.
func newNetTransport(mc *memberlist.Config) (*memberlist.NetTransport, error) {
	nc := &memberlist.NetTransportConfig{BindAddrs: []string{mc.BindAddr}, BindPort: mc.BindPort, Logger: mc.Logger}
	attempts := 1
	if mc.BindPort == 0 {
		attempts = 10
	}
	var err error
	for range attempts {
		var nt *memberlist.NetTransport
		if nt, err = memberlist.NewNetTransport(nc); err == nil {
			if mc.BindPort == 0 {
				port := nt.GetAutoBindPort()
				mc.BindPort = port
				if mc.AdvertiseAddr == "" || mc.AdvertisePort == 0 {
					mc.AdvertisePort = port
				}
			}
			return nt, nil
		}
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, err
}
