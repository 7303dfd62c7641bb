package transport

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"google.golang.org/grpc"

	"github.com/causeway-db/causeway/internal/logging"
	"github.com/causeway-db/causeway/internal/poll"
)

// This file holds the in-process clusters the tests run: real gRPC servers on
// loopback listeners, real hashicorp/raft groups over Networks.

// testLogger logs to stderr with -v and nowhere otherwise.
func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// testNode is one node: a Network on a gRPC server, and its raft groups.
type testNode struct {
	id   string
	addr string
	net  *Network
	srv  *grpc.Server
	log  *slog.Logger

	mu      sync.Mutex
	rafts   map[string]*raft.Raft
	fsms    map[string]*countFSM
	stopped bool
}

// newTestNode starts a node; tweak adjusts its transport config.
func newTestNode(t *testing.T, id string, tweak func(*Config)) *testNode {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig(lis.Addr().String())
	cfg.RPCTimeout = 2 * time.Second
	cfg.DialTimeout = 500 * time.Millisecond
	cfg.ReconnectBackoff = 200 * time.Millisecond
	cfg.BatchDelay = 20 * time.Millisecond        // raftConfig's CommitTimeout is 10 ms
	cfg.KeepaliveInterval = 50 * time.Millisecond // a fifth of raftConfig's lease
	if tweak != nil {
		tweak(&cfg)
	}
	log := testLogger().With("node", id)
	n, err := New(cfg, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(cfg.ServerOptions()...)
	n.Register(srv)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	node := &testNode{id: id, addr: cfg.Advertise, net: n, srv: srv, log: log,
		rafts: make(map[string]*raft.Raft), fsms: make(map[string]*countFSM)}
	t.Cleanup(func() {
		node.stop()
		<-served
	})
	return node
}

// raftConfig returns raft timings fast enough for tests and slow enough
// for -race on a loaded machine. Tests tolerate leadership changes anyway.
func raftConfig(id string, log *slog.Logger) *raft.Config {
	c := raft.DefaultConfig()
	c.LocalID = raft.ServerID(id)
	c.HeartbeatTimeout = 500 * time.Millisecond
	c.ElectionTimeout = 500 * time.Millisecond
	c.LeaderLeaseTimeout = 250 * time.Millisecond
	c.CommitTimeout = 10 * time.Millisecond
	c.SnapshotInterval = time.Hour
	c.Logger = logging.HCLog(log, "raft", hclog.Warn)
	return c
}

// startGroup starts this node's replica of group, bootstrapped with peers
// (none: join later through AddVoter).
func (n *testNode) startGroup(t *testing.T, group string, snaps raft.SnapshotStore, tweak func(*raft.Config), peers []raft.Server) (*raft.Raft, *countFSM) {
	t.Helper()
	return n.startGroupOn(t, group, raft.NewInmemStore(), snaps, tweak, peers)
}

// logAndStable is a raft log store that is also its stable store.
type logAndStable interface {
	raft.LogStore
	raft.StableStore
}

// startGroupOn is startGroup over the given log and stable store.
func (n *testNode) startGroupOn(t *testing.T, group string, store logAndStable, snaps raft.SnapshotStore, tweak func(*raft.Config), peers []raft.Server) (*raft.Raft, *countFSM) {
	t.Helper()
	trans, err := n.net.Transport(group)
	if err != nil {
		t.Fatal(err)
	}
	conf := raftConfig(n.id, n.log.With("group", group))
	if tweak != nil {
		tweak(conf)
	}
	if len(peers) > 0 {
		if err := raft.BootstrapCluster(conf, store, store, snaps, trans, raft.Configuration{Servers: peers}); err != nil {
			t.Fatal(err)
		}
	}
	return n.openOver(t, group, conf, store, snaps, trans)
}

// stop shuts the node down: raft groups, then the Network, then the server.
func (n *testNode) stop() {
	n.mu.Lock()
	if n.stopped {
		n.mu.Unlock()
		return
	}
	n.stopped = true
	rafts := n.rafts
	n.mu.Unlock()
	for _, r := range rafts {
		_ = r.Shutdown().Error()
	}
	_ = n.net.Close()
	n.srv.Stop()
}

// crash stops the node abruptly: the Network and server go first, then the
// rafts.
func (n *testNode) crash() {
	n.mu.Lock()
	n.stopped = true
	rafts := n.rafts
	n.mu.Unlock()
	_ = n.net.Close()
	n.srv.Stop()
	for _, r := range rafts {
		_ = r.Shutdown().Error()
	}
}

func servers(nodes ...*testNode) []raft.Server {
	var s []raft.Server
	for _, n := range nodes {
		s = append(s, raft.Server{ID: raft.ServerID(n.id), Address: raft.ServerAddress(n.addr)})
	}
	return s
}

// waitFor polls cond every 5ms until it holds or timeout passes.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Every(5*time.Millisecond).Until(t, timeout, what, poll.True(cond))
}

// leaderOf waits until one of rafts leads and the others know it.
func leaderOf(timeout time.Duration, rafts ...*raft.Raft) (*raft.Raft, error) {
	var leader *raft.Raft
	err := poll.Every(5*time.Millisecond).Wait(timeout, func() error {
		leader = nil
		for _, r := range rafts {
			if r.State() == raft.Leader {
				leader = r
			}
		}
		if leader == nil {
			return errors.New("no leader")
		}
		_, id := leader.LeaderWithID()
		for _, r := range rafts {
			if _, lid := r.LeaderWithID(); lid != id {
				return fmt.Errorf("a replica follows %q, not %q", lid, id)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return leader, nil
}

func waitLeader(t *testing.T, rafts ...*raft.Raft) *raft.Raft {
	t.Helper()
	leader, err := leaderOf(15*time.Second, rafts...)
	if err != nil {
		t.Fatal(err)
	}
	return leader
}

// applyAll applies the commands from..from+n-1, all in flight at once, on
// the leader of rafts. Commands that fail because leadership changed are
// applied again on the next leader; the FSM ignores duplicates.
func applyAll(rafts []*raft.Raft, from, n int) error {
	pending := make([]uint64, n)
	for i := range pending {
		pending[i] = uint64(from + i)
	}
	for attempt := 0; len(pending) > 0; attempt++ {
		if attempt == 10 {
			return fmt.Errorf("%d commands still failing after %d attempts", len(pending), attempt)
		}
		leader, err := leaderOf(15*time.Second, rafts...)
		if err != nil {
			return err
		}
		futures := make([]raft.ApplyFuture, len(pending))
		for i, v := range pending {
			futures[i] = leader.Apply(binary.BigEndian.AppendUint64(nil, v), 10*time.Second)
		}
		var failed []uint64
		for i, f := range futures {
			switch err := f.Error(); {
			case err == nil:
			case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrNotLeader),
				errors.Is(err, raft.ErrEnqueueTimeout), errors.Is(err, raft.ErrLeadershipTransferInProgress):
				failed = append(failed, pending[i])
			default:
				return fmt.Errorf("apply %d: %w", pending[i], err)
			}
		}
		pending = failed
	}
	return nil
}

func applyN(t *testing.T, rafts []*raft.Raft, from, n int) {
	t.Helper()
	if err := applyAll(rafts, from, n); err != nil {
		t.Fatal(err)
	}
}

// waitConverged waits until every fsm has applied exactly the commands
// 1..n.
func waitConverged(t *testing.T, n int, fsms map[string]*countFSM) {
	t.Helper()
	for name, f := range fsms {
		waitFor(t, 15*time.Second, fmt.Sprintf("%s to apply commands 1..%d", name, n), func() bool {
			c, s, _ := f.state()
			return c == uint64(n) && s == sumTo(n)
		})
	}
}

// sumTo is 1+2+...+n.
func sumTo(n int) uint64 { return uint64(n) * uint64(n+1) / 2 }

// countFSM records the distinct uint64 commands it applies. Its snapshots
// carry padding bytes (a checked pattern) to make them span several
// chunks.
type countFSM struct {
	padding int // bytes of padding in snapshots; set before use

	mu       sync.Mutex
	seen     map[uint64]struct{}
	sum      uint64
	restores int
}

func (f *countFSM) Apply(l *raft.Log) any {
	if len(l.Data) != 8 {
		panic(fmt.Sprintf("countFSM: command of %d bytes", len(l.Data)))
	}
	v := binary.BigEndian.Uint64(l.Data)
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = make(map[uint64]struct{})
	}
	if _, dup := f.seen[v]; !dup {
		f.seen[v] = struct{}{}
		f.sum += v
	}
	return nil
}

func (f *countFSM) state() (count, sum uint64, restores int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return uint64(len(f.seen)), f.sum, f.restores
}

func (f *countFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &countSnapshot{padding: f.padding}
	for v := range f.seen {
		s.values = append(s.values, v)
	}
	return s, nil
}

func padByte(i int) byte { return byte(i*7 + i/251) }

// Restore reads what countSnapshot.Persist wrote: the number of values,
// the values, the number of padding bytes, the padding.
func (f *countFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		return err
	}
	next := func() (uint64, error) {
		if len(data) < 8 {
			return 0, errors.New("countFSM: snapshot truncated")
		}
		v := binary.BigEndian.Uint64(data)
		data = data[8:]
		return v, nil
	}
	n, err := next()
	if err != nil {
		return err
	}
	seen := make(map[uint64]struct{})
	var sum uint64
	for i := uint64(0); i < n; i++ {
		v, err := next()
		if err != nil {
			return err
		}
		seen[v] = struct{}{}
		sum += v
	}
	pad, err := next()
	if err != nil {
		return err
	}
	if uint64(len(data)) != pad {
		return fmt.Errorf("countFSM: %d bytes of padding, want %d", len(data), pad)
	}
	for i, b := range data {
		if b != padByte(i) {
			return fmt.Errorf("countFSM: padding byte %d corrupt", i)
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seen, f.sum = seen, sum
	f.restores++
	return nil
}

type countSnapshot struct {
	values  []uint64
	padding int
}

func (s *countSnapshot) Persist(sink raft.SnapshotSink) error {
	var buf bytes.Buffer
	buf.Write(binary.BigEndian.AppendUint64(nil, uint64(len(s.values))))
	for _, v := range s.values {
		buf.Write(binary.BigEndian.AppendUint64(nil, v))
	}
	buf.Write(binary.BigEndian.AppendUint64(nil, uint64(s.padding)))
	for i := 0; i < s.padding; i++ {
		buf.WriteByte(padByte(i))
	}
	if _, err := sink.Write(buf.Bytes()); err != nil {
		_ = sink.Cancel()
		return err
	}
	return sink.Close()
}

func (s *countSnapshot) Release() {}

// counterValue reads a counter of the metrics.
func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// sentOK sums the requests of type typ the nodes sent and had answered.
func sentOK(t *testing.T, nodes []*testNode, typ string) float64 {
	t.Helper()
	n := 0.0
	for _, nd := range nodes {
		n += counterValue(t, nd.net.metrics.sent.WithLabelValues(typ, "OK"))
	}
	return n
}
