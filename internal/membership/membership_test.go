package membership

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/causeway-db/causeway/internal/poll"
)

// syncBuffer collects log output from memberlist's goroutines, which may
// outlive a test; it is printed only when the test failed.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func testLogger(t *testing.T) *slog.Logger {
	t.Helper()
	var b syncBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("log:\n%s", b.String())
		}
	})
	return slog.New(slog.NewTextHandler(&b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

// testNode is a Membership with its own metrics registry.
type testNode struct {
	*Membership
	reg *prometheus.Registry
}

// testConfig returns a fast local-profile config on a kernel-chosen port.
func testConfig(site, id string, clientPort int) Config {
	cfg := DefaultConfig("127.0.0.1:0", Meta{
		Site:       site,
		NodeID:     id,
		ClientAddr: "127.0.0.1:" + strconv.Itoa(clientPort),
		PeerAddr:   "127.0.0.1:" + strconv.Itoa(clientPort+1),
	})
	cfg.Profile = ProfileLocal
	cfg.ProbeInterval = 200 * time.Millisecond
	cfg.ProbeTimeout = 100 * time.Millisecond
	cfg.GossipInterval = 20 * time.Millisecond
	// Anti-entropy: memberlist retransmits a gossip message only a few
	// times (RetransmitMult*log(N)), so a member may miss a join until the
	// next push/pull (15s in the local profile).
	cfg.PushPullInterval = 200 * time.Millisecond
	cfg.SuspicionMult = 3
	cfg.TCPTimeout = 500 * time.Millisecond
	cfg.JoinBackoff = 20 * time.Millisecond
	cfg.JoinMaxBackoff = 200 * time.Millisecond
	cfg.LeaveTimeout = 2 * time.Second
	return cfg
}

func startNode(t *testing.T, cfg Config, logger *slog.Logger) testNode {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := New(cfg, logger.With("node", cfg.Meta.Name()), reg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Meta.Name(), err)
	}
	t.Cleanup(func() {
		if err := m.Shutdown(); err != nil {
			t.Errorf("Shutdown(%s): %v", cfg.Meta.Name(), err)
		}
	})
	return testNode{m, reg}
}

// startCluster starts n nodes of site "s1" and joins them all through the
// first one.
func startCluster(t *testing.T, n int) []testNode {
	t.Helper()
	logger := testLogger(t)
	nodes := make([]testNode, n)
	for i := range nodes {
		nodes[i] = startNode(t, testConfig("s1", fmt.Sprintf("n%d", i), 7000+10*i), logger)
	}
	seed := nodes[0].Local().GossipAddr
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, nd := range nodes[1:] {
		if k, err := nd.Join(ctx, []string{seed}); err != nil || k != 1 {
			t.Fatalf("%s: Join(%s) = %d, %v", nd.name, seed, k, err)
		}
	}
	waitFor(t, 10*time.Second, "all nodes see every node alive", func() (bool, string) {
		for _, nd := range nodes {
			if ok, why := allAlive(nd.Members(), n); !ok {
				return false, nd.name + ": " + why
			}
		}
		return true, ""
	})
	return nodes
}

func allAlive(ms []Member, n int) (bool, string) {
	if len(ms) != n {
		return false, fmt.Sprintf("%d members, want %d: %v", len(ms), n, ms)
	}
	for _, m := range ms {
		if m.State != StateAlive {
			return false, fmt.Sprintf("%s is %v", m.Name(), m.State)
		}
	}
	return true, ""
}

// waitFor polls cond every 5ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Every(5*time.Millisecond).Until(t, timeout, what, func() error {
		if ok, why := cond(); !ok {
			return errors.New(why)
		}
		return nil
	})
}

func member(ms []Member, name string) (Member, bool) {
	for _, m := range ms {
		if m.Name() == name {
			return m, true
		}
	}
	return Member{}, false
}

// counter reads a counter's value.
func counter(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatalf("read counter: %v", err)
	}
	return m.GetCounter().GetValue()
}

// gauge reads causeway_membership_members{state} from reg.
func gauge(t *testing.T, reg *prometheus.Registry, state State) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "causeway_membership_members" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "state" && l.GetValue() == state.String() {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	t.Fatalf("no causeway_membership_members{state=%q}", state)
	return 0
}

// awaitEvent reads events from ch until match accepts one.
func awaitEvent(t *testing.T, ch <-chan Event, timeout time.Duration, what string, match func(Event) bool) Event {
	t.Helper()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var seen []string
	for {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("events closed while waiting for %s; saw %v", what, seen)
			}
			if match(e) {
				return e
			}
			seen = append(seen, e.Kind.String()+" "+e.Member.Name()+" "+e.Member.State.String())
		case <-timer.C:
			t.Fatalf("no %s within %v; saw %v", what, timeout, seen)
		}
	}
}

// Test 1: five nodes join through one seed and all agree on who is alive and
// on everyone's Meta.
func TestFiveNodesJoinThroughSeed(t *testing.T) {
	nodes := startCluster(t, 5)
	want := make(map[string]Member)
	for _, nd := range nodes {
		l := nd.Local()
		if l.State != StateAlive || l.Meta != nd.cfg.Meta || !strings.HasPrefix(l.GossipAddr, "127.0.0.1:") || strings.HasSuffix(l.GossipAddr, ":0") {
			t.Fatalf("Local() = %+v", l)
		}
		want[l.Name()] = l
	}
	// Polled, not checked once: a loaded machine may cause a moment of
	// (refuted) suspicion.
	waitFor(t, 5*time.Second, "every node sees every node's meta and gossip address", func() (bool, string) {
		for _, nd := range nodes {
			ms := nd.Members()
			if len(ms) != len(want) {
				return false, fmt.Sprintf("%s sees %d members", nd.name, len(ms))
			}
			for i, m := range ms {
				if i > 0 && ms[i-1].Name() >= m.Name() {
					t.Fatalf("%s: Members not sorted by name: %v", nd.name, ms)
				}
				if w := want[m.Name()]; m != w {
					return false, fmt.Sprintf("%s sees %+v, want %+v", nd.name, m, w)
				}
			}
			if got := gauge(t, nd.reg, StateAlive); got != 5 {
				return false, fmt.Sprintf("%s: members{state=alive} = %v, want 5", nd.name, got)
			}
		}
		return true, ""
	})
	// The seed saw a join event for every node, itself first.
	first := awaitEvent(t, nodes[0].Events(), time.Second, "seed's own join", func(Event) bool { return true })
	if first.Kind != EventJoin || first.Member.Name() != nodes[0].name {
		t.Fatalf("first event %+v, want the seed's own join", first)
	}
	joined := map[string]bool{}
	for len(joined) < 4 {
		e := awaitEvent(t, nodes[0].Events(), 5*time.Second, "joins", func(e Event) bool { return e.Kind == EventJoin })
		if e.Member != want[e.Member.Name()] {
			t.Fatalf("join event %+v, want %+v", e.Member, want[e.Member.Name()])
		}
		joined[e.Member.Name()] = true
	}
	if got := counter(t, nodes[1].metrics.joinAttempts); got != 1 {
		t.Fatalf("join attempts = %v, want 1", got)
	}
	if got := counter(t, nodes[0].metrics.events.WithLabelValues("join")); got != 5 {
		t.Fatalf("seed events_total{kind=join} = %v, want 5", got)
	}
}

// Test 2: a node that stops without leaving becomes suspect, then dead, on
// every other node, and they all deliver a Leave event for it.
func TestAbruptShutdownSuspectThenDead(t *testing.T) {
	nodes := startCluster(t, 4)
	victim, others := nodes[3], nodes[:3]
	stopped := time.Now()
	if err := victim.Shutdown(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	suspected := make([]bool, len(others))
	waitFor(t, 10*time.Second, "the others report "+victim.name+" dead", func() (bool, string) {
		done := true
		why := ""
		for i, o := range others {
			m, ok := member(o.Members(), victim.name)
			switch {
			case !ok:
				t.Fatalf("%s forgot %s", o.name, victim.name)
			case m.State == StateSuspect:
				suspected[i] = true
			case m.State == StateAlive:
				if suspected[i] {
					t.Fatalf("%s reports %s alive again after suspecting it", o.name, victim.name)
				}
			}
			if m.State != StateDead {
				done = false
				why = fmt.Sprintf("%s reports %s %v", o.name, victim.name, m.State)
			}
		}
		return done, why
	})
	for _, o := range others { // DownSince: when gossip declared it dead
		for _, m := range o.Members() {
			switch {
			case m.Name() == victim.name && (m.DownSince.Before(stopped) || m.DownSince.After(time.Now())):
				t.Errorf("%s: %s down since %v, stopped at %v", o.name, victim.name, m.DownSince, stopped)
			case m.Name() != victim.name && !m.DownSince.IsZero():
				t.Errorf("%s: live member %s down since %v", o.name, m.Name(), m.DownSince)
			}
		}
	}
	for i, o := range others {
		if !suspected[i] {
			t.Errorf("%s reported %s dead without reporting it suspect first", o.name, victim.name)
		}
		e := awaitEvent(t, o.Events(), 5*time.Second, "leave of "+victim.name, func(e Event) bool {
			return e.Kind == EventLeave && e.Member.Name() == victim.name
		})
		if e.Member.State != StateDead || e.Member.Meta != victim.cfg.Meta {
			t.Fatalf("%s: leave event %+v, want %s dead", o.name, e.Member, victim.name)
		}
		// Polled: a loaded machine may cause a moment of (refuted)
		// suspicion of a live node.
		waitFor(t, 5*time.Second, o.name+" counts 3 alive and 1 dead", func() (bool, string) {
			alive, dead := gauge(t, o.reg, StateAlive), gauge(t, o.reg, StateDead)
			return alive == 3 && dead == 1, fmt.Sprintf("alive %v dead %v; members %v", alive, dead, o.Members())
		})
	}
}

// Test 3: a node that leaves gracefully is reported left, well before
// failure detection could have declared it dead.
func TestGracefulLeave(t *testing.T) {
	nodes := startCluster(t, 3)
	leaver, others := nodes[2], nodes[:2]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	if err := leaver.Leave(ctx); err != nil {
		t.Fatalf("Leave: %v", err)
	}
	if got := leaver.Local().State; got != StateLeft {
		t.Fatalf("leaver's Local().State = %v, want left", got)
	}
	waitFor(t, time.Second, "the others report "+leaver.name+" left", func() (bool, string) {
		for _, o := range others {
			if m, _ := member(o.Members(), leaver.name); m.State != StateLeft {
				return false, fmt.Sprintf("%s reports %s %v", o.name, leaver.name, m.State)
			}
		}
		return true, ""
	})
	t.Logf("left everywhere %v after Leave started", time.Since(start))
	for _, o := range others {
		e := awaitEvent(t, o.Events(), time.Second, "leave of "+leaver.name, func(e Event) bool {
			return e.Kind == EventLeave && e.Member.Name() == leaver.name
		})
		if e.Member.State != StateLeft {
			t.Fatalf("%s: leave event state %v, want left", o.name, e.Member.State)
		}
	}
	if err := leaver.Leave(ctx); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	if _, err := leaver.Join(ctx, []string{others[0].Local().GossipAddr}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Join after Leave = %v, want ErrClosed", err)
	}
}

// A meta update reaches the others as an Update event.
func TestUpdateMeta(t *testing.T) {
	nodes := startCluster(t, 2)
	a, b := nodes[0], nodes[1]
	meta := a.cfg.Meta
	meta.ClientAddr = "127.0.0.1:9999"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := a.UpdateMeta(ctx, meta); err != nil {
		t.Fatalf("UpdateMeta: %v", err)
	}
	e := awaitEvent(t, b.Events(), 2*time.Second, "update of "+a.name, func(e Event) bool {
		return e.Kind == EventUpdate && e.Member.Name() == a.name
	})
	if e.Member.Meta != meta || e.Member.State != StateAlive {
		t.Fatalf("update event %+v, want meta %+v", e.Member, meta)
	}
	if m, _ := member(b.Members(), a.name); m.Meta != meta {
		t.Fatalf("%s sees %+v, want meta %+v", b.name, m, meta)
	}
	if got := a.Local().Meta; got != meta {
		t.Fatalf("Local().Meta = %+v, want %+v", got, meta)
	}
	renamed := meta
	renamed.NodeID = "other"
	if err := a.UpdateMeta(ctx, renamed); !errors.Is(err, ErrInvalidMeta) {
		t.Fatalf("UpdateMeta with a new node id = %v, want ErrInvalidMeta", err)
	}
}

// rogueDelegate announces a fixed node meta, whatever it is.
type rogueDelegate struct{ meta []byte }

func (d rogueDelegate) NodeMeta(int) []byte                 { return d.meta }
func (d rogueDelegate) NotifyMsg([]byte)                    {}
func (d rogueDelegate) GetBroadcasts(int, int) [][]byte     { return nil }
func (d rogueDelegate) LocalState(bool) []byte              { return nil }
func (d rogueDelegate) MergeRemoteState(buf []byte, _ bool) {}

// Members that announce undecodable meta, or meta naming another node, are
// skipped, logged and counted, and nothing panics.
func TestMalformedMetaFromNetwork(t *testing.T) {
	nodes := startCluster(t, 2)
	otherName, _ := Meta{Site: "s9", NodeID: "x", ClientAddr: "h:1", PeerAddr: "h:2"}.MarshalBinary()
	rogues := map[string][]byte{
		"garbage":   {0xff, 0x00, 0x13, 0x37, 'j', 'u', 'n', 'k'},
		"empty":     nil,
		"s1/liar":   otherName,
		"truncated": otherName[:10],
	}
	for name, meta := range rogues {
		mc := memberlist.DefaultLocalConfig()
		mc.Name = name
		mc.BindAddr = "127.0.0.1"
		mc.BindPort = 0
		mc.Delegate = rogueDelegate{meta: meta}
		mc.Logger = log.New(io.Discard, "", 0)
		ml, err := memberlist.Create(mc)
		if err != nil {
			t.Fatalf("rogue %s: %v", name, err)
		}
		t.Cleanup(func() { _ = ml.Shutdown() })
		if _, err := ml.Join([]string{nodes[0].Local().GossipAddr}); err != nil {
			t.Fatalf("rogue %s join: %v", name, err)
		}
	}
	for _, nd := range nodes {
		waitFor(t, 5*time.Second, nd.name+" hears of every rogue", func() (bool, string) {
			// memberlist's own count (alive nodes, names only: no race).
			if k := nd.ml.NumMembers(); k != 2+len(rogues) {
				return false, fmt.Sprintf("memberlist knows %d members", k)
			}
			return true, ""
		})
		if ok, why := allAlive(nd.Members(), 2); !ok {
			t.Fatalf("%s: %s", nd.name, why)
		}
		if got := counter(t, nd.metrics.malformedMeta); got < float64(len(rogues)) {
			t.Fatalf("%s: malformed_meta_total = %v, want >= %d", nd.name, got, len(rogues))
		}
	}
	// The seed's events mention no rogue.
	for {
		select {
		case e := <-nodes[0].Events():
			if _, rogue := rogues[e.Member.Name()]; rogue || e.Member.Site == "s9" {
				t.Fatalf("event about a rogue: %+v", e)
			}
			continue
		default:
		}
		break
	}
}

// Join retries until ctx ends when nobody answers.
func TestJoinGivesUpAtDeadline(t *testing.T) {
	logger := testLogger(t)
	nd := startNode(t, testConfig("s1", "lonely", 7100), logger)
	dead := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	n, err := nd.Join(ctx, []string{dead})
	if n != 0 || !errors.Is(err, ErrJoin) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Join(%s) = %d, %v; want 0, ErrJoin wrapping DeadlineExceeded", dead, n, err)
	}
	attempts := counter(t, nd.metrics.joinAttempts)
	if attempts < 2 || counter(t, nd.metrics.joinFailures) != attempts {
		t.Fatalf("attempts %v failures %v: want several attempts, all failed", attempts, counter(t, nd.metrics.joinFailures))
	}
	if _, err := nd.Join(context.Background(), nil); !errors.Is(err, ErrJoin) {
		t.Fatalf("Join(no addresses) = %v, want ErrJoin", err)
	}
}

// Join keeps retrying until the seed comes up.
func TestJoinRetriesUntilSeedStarts(t *testing.T) {
	logger := testLogger(t)
	joiner := startNode(t, testConfig("s1", "early", 7200), logger)
	seedAddr := freeAddr(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := joiner.Join(ctx, []string{seedAddr})
		done <- result{n, err}
	}()
	waitFor(t, 5*time.Second, "the joiner failed twice", func() (bool, string) {
		return counter(t, joiner.metrics.joinFailures) >= 2, ""
	})
	cfg := testConfig("s1", "late-seed", 7210)
	cfg.BindAddr = seedAddr
	seed := startNode(t, cfg, logger)
	r := <-done
	if r.err != nil || r.n != 1 {
		t.Fatalf("Join = %d, %v", r.n, r.err)
	}
	waitFor(t, 5*time.Second, "the seed sees the joiner", func() (bool, string) {
		return allAlive(seed.Members(), 2)
	})
}

// freeAddr returns a 127.0.0.1 port that is free for both TCP and UDP
// right now.
func freeAddr(t *testing.T) string {
	t.Helper()
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err == nil {
			u.Close()
			return addr
		}
	}
	t.Fatal("no free port")
	return ""
}

// When the reader falls behind, the oldest events are dropped and the
// callbacks never block.
func TestEventsDropOldest(t *testing.T) {
	cfg := testConfig("s1", "solo", 7300)
	cfg.EventBuffer = 2
	nd := startNode(t, cfg, testLogger(t))
	d := &delegate{m: nd.Membership}
	for i := range 5 {
		meta := Meta{Site: "s2", NodeID: fmt.Sprintf("f%d", i), ClientAddr: "h:1", PeerAddr: "h:2"}
		b, _ := meta.MarshalBinary()
		d.NotifyJoin(&memberlist.Node{Name: meta.Name(), Addr: net.IPv4(10, 0, 0, byte(i)), Port: 7946, Meta: b})
	}
	var got []string
	for range 2 {
		got = append(got, (<-nd.Events()).Member.Name())
	}
	if strings.Join(got, ",") != "s2/f3,s2/f4" {
		t.Fatalf("events kept %v, want the newest two", got)
	}
	// Self join + 5 fakes into a buffer of 2: 4 dropped.
	if d := counter(t, nd.metrics.eventsDropped); d != 4 {
		t.Fatalf("events_dropped_total = %v, want 4", d)
	}
}

// TestIntrospectorFound guards internals.go: if a memberlist upgrade
// changes its node table, suspect members would silently be reported alive
// and members that left, dead.
func TestIntrospectorFound(t *testing.T) {
	nd := startNode(t, testConfig("s1", "intro", 7400), testLogger(t))
	in := nd.intro.Load()
	if in == nil {
		t.Fatal("cannot read memberlist's node table; see internals.go")
	}
	states := in.states()
	if len(states) != 1 || states[nd.name] != memberlist.StateAlive {
		t.Fatalf("states() = %v, want only %s alive", states, nd.name)
	}
	if newIntrospector(nil) != nil {
		t.Fatal("newIntrospector(nil) != nil")
	}
}

// Test 5: Shutdown stops every goroutine, and the API behaves afterwards.
func TestShutdownStopsGoroutines(t *testing.T) {
	baseline := runtime.NumGoroutine()
	logger := testLogger(t)
	var nodes []*Membership
	for i := range 3 {
		m, err := New(testConfig("s1", fmt.Sprintf("g%d", i), 7500+10*i), logger, prometheus.NewRegistry())
		if err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, m := range nodes[1:] {
		if _, err := m.Join(ctx, []string{nodes[0].Local().GossipAddr}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the cluster converges", func() (bool, string) { return allAlive(nodes[0].Members(), 3) })
	if err := nodes[2].Leave(ctx); err != nil {
		t.Fatal(err)
	}
	for _, m := range nodes {
		if err := m.Shutdown(); err != nil {
			t.Fatal(err)
		}
		if err := m.Shutdown(); err != nil {
			t.Fatalf("second Shutdown: %v", err)
		}
		if err := m.Leave(ctx); !errors.Is(err, ErrClosed) {
			t.Fatalf("Leave after Shutdown = %v, want ErrClosed", err)
		}
		if _, err := m.Join(ctx, []string{"127.0.0.1:1"}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Join after Shutdown = %v, want ErrClosed", err)
		}
		for range m.Events() { // drains, then ends: the channel is closed
		}
		_ = m.Members()
	}
	waitFor(t, 10*time.Second, "goroutines return to the baseline", func() (bool, string) {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		n := runtime.NumGoroutine()
		if n <= baseline && !strings.Contains(stacks, "hashicorp/memberlist") {
			return true, ""
		}
		return false, fmt.Sprintf("%d goroutines, baseline %d:\n%s", n, baseline, stacks)
	})
}
