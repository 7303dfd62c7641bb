package transport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"

	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/grpcopts"
)

// Network is a node's raft transport: the Raft gRPC service for incoming
// RPCs of every hosted group, and a pool of connections to peers for
// outgoing ones.
type Network struct {
	cfg      Config
	log      *slog.Logger
	metrics  *metrics
	dialOpts []grpc.DialOption
	batch    batcher     // batch.go
	inc      incarnation // incarnation.go
	// stopKeepalives ends the keepalive goroutine (quiet.go), if any;
	// keepalivesDone is closed when it returned.
	stopKeepalives, keepalivesDone chan struct{}
	// stopping is set by RefuseLeadership (stopping.go).
	stopping atomic.Bool

	mu struct {
		sync.RWMutex
		closed bool
		groups map[string]*groupTransport
		conns  map[string]*peerConn
	}
}

// peerConn is the pooled connection to one peer address.
type peerConn struct {
	cc     *grpc.ClientConn
	client peerv1.RaftClient
}

// New returns a Network. reg, if not nil, receives its metrics.
func New(cfg Config, logger *slog.Logger, reg prometheus.Registerer) (*Network, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	n := &Network{
		cfg:     cfg,
		log:     logger.With("component", "transport"),
		metrics: newMetrics(reg),
	}
	n.mu.groups = make(map[string]*groupTransport)
	n.mu.conns = make(map[string]*peerConn)
	n.batch.init(n)
	n.dialOpts = append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(n.dial),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff: backoff.Config{
				BaseDelay:  50 * time.Millisecond,
				Multiplier: 1.6,
				Jitter:     0.2,
				MaxDelay:   cfg.ReconnectBackoff,
			},
			MinConnectTimeout: cfg.DialTimeout,
		}),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(cfg.MaxMsgBytes),
			grpc.MaxCallSendMsgSize(cfg.MaxMsgBytes),
		),
	}, append(grpcopts.DialOptions(), cfg.DialOptions...)...)
	if cfg.KeepaliveInterval > 0 {
		n.stopKeepalives, n.keepalivesDone = make(chan struct{}), make(chan struct{})
		go func() {
			defer close(n.keepalivesDone)
			n.runKeepalives(n.stopKeepalives)
		}()
	}
	return n, nil
}

// Register registers the Raft service on the node's peer gRPC server
// (created with Config.ServerOptions).
func (n *Network) Register(s grpc.ServiceRegistrar) {
	peerv1.RegisterRaftServer(s, &service{n: n})
}

// Transport opens the raft transport of group. It fails with
// ErrDuplicateGroup while the group's transport is open, and with ErrClosed
// after Close. Its Close unregisters the group.
func (n *Network) Transport(group string) (raft.Transport, error) {
	return n.open(group, "", false)
}

// TransportAt is Transport for a group whose other members dial this node
// at advertise (host:port; "" for Config.Advertise): the cluster
// configuration group, whose members are in other sites, which may reach
// the node at another address than its own site does.
//
// Its requests carry no site incarnation and are not checked for one: its
// members are nodes of several sites (incarnation.go).
func (n *Network) TransportAt(group, advertise string) (raft.Transport, error) {
	return n.open(group, advertise, true)
}

func (n *Network) open(group, advertise string, crossSite bool) (raft.Transport, error) {
	if err := validGroup(group); err != nil {
		return nil, err
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return nil, ErrClosed
	}
	if _, ok := n.mu.groups[group]; ok {
		return nil, fmt.Errorf("%w: %q", ErrDuplicateGroup, group)
	}
	g := newGroupTransport(n, group)
	g.advertise = advertise
	g.crossSite = crossSite
	n.mu.groups[group] = g
	return g, nil
}

// Close closes every group transport and every outgoing connection. Later
// calls to Transport fail with ErrClosed; incoming RPCs are answered with
// codes.Unavailable. It is safe to call more than once.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.mu.closed {
		n.mu.Unlock()
		return nil
	}
	n.mu.closed = true
	groups := make([]*groupTransport, 0, len(n.mu.groups))
	for _, g := range n.mu.groups {
		groups = append(groups, g)
	}
	conns := n.mu.conns
	n.mu.conns = nil
	n.mu.Unlock()
	if n.stopKeepalives != nil {
		close(n.stopKeepalives)
		<-n.keepalivesDone
	}

	for _, g := range groups {
		_ = g.Close()
	}
	var errs []error
	for target, c := range conns {
		if err := c.cc.Close(); err != nil {
			errs = append(errs, fmt.Errorf("transport: close connection to %s: %w", target, err))
		}
	}
	n.batch.close()
	return errors.Join(errs...)
}

// group returns the open transport of name.
func (n *Network) group(name string) (*groupTransport, error) {
	n.mu.RLock()
	defer n.mu.RUnlock()
	if n.mu.closed {
		return nil, ErrClosed
	}
	g, ok := n.mu.groups[name]
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrUnknownGroup, name)
	}
	return g, nil
}

// unregister removes g, if it is still the open transport of its group.
func (n *Network) unregister(g *groupTransport) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.groups[g.name] == g {
		delete(n.mu.groups, g.name)
	}
}

// client returns the client of target's pooled connection, creating it
// (without dialling: gRPC connects on first use) if needed.
func (n *Network) client(target raft.ServerAddress) (peerv1.RaftClient, error) {
	if target == "" {
		return nil, errors.New("transport: empty target address")
	}
	key := string(target)
	n.mu.RLock()
	c, ok := n.mu.conns[key]
	closed := n.mu.closed
	n.mu.RUnlock()
	switch {
	case ok:
		return c.client, nil
	case closed:
		return nil, ErrClosed
	}

	n.mu.Lock()
	defer n.mu.Unlock()
	if n.mu.closed {
		return nil, ErrClosed
	}
	if c, ok := n.mu.conns[key]; ok {
		return c.client, nil
	}
	cc, err := grpc.NewClient(key, n.dialOpts...)
	if err != nil {
		n.metrics.dialErrors.Inc()
		return nil, fmt.Errorf("transport: connection to %s: %w", key, err)
	}
	c = &peerConn{cc: cc, client: peerv1.NewRaftClient(cc)}
	n.mu.conns[key] = c
	return c.client, nil
}

// dial connects to a peer; it is the connections' dialer, and counts
// failures.
func (n *Network) dial(ctx context.Context, addr string) (net.Conn, error) {
	var conn net.Conn
	var err error
	if n.cfg.Dial != nil {
		dctx, cancel := context.WithTimeout(ctx, n.cfg.DialTimeout)
		conn, err = n.cfg.Dial(dctx, addr)
		cancel()
	} else {
		d := net.Dialer{Timeout: n.cfg.DialTimeout}
		conn, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil && ctx.Err() == nil {
		n.metrics.dialErrors.Inc()
		n.log.Debug("dial failed", "addr", addr, "err", err)
	}
	return conn, err
}
