package transport

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/causeway-db/causeway/internal/grpcopts"
)

// Config configures a node's Network.
type Config struct {
	// Advertise is this node's peer address (host:port) as other nodes dial
	// it; it is each group transport's LocalAddr().
	Advertise string
	// DialTimeout bounds establishing one connection to a peer.
	DialTimeout time.Duration
	// ReconnectBackoff is the longest wait between two attempts to
	// re-establish a broken connection to a peer. Keep it short: RPCs to a
	// peer that is between attempts fail at once.
	ReconnectBackoff time.Duration
	// RPCTimeout bounds each unary RPC (AppendEntries, votes, TimeoutNow)
	// and each pipelined AppendEntries, from sending to its response.
	RPCTimeout time.Duration
	// SnapshotTimeout bounds one InstallSnapshot, transfer and the
	// receiver's restore included.
	SnapshotTimeout time.Duration
	// SnapshotChunkBytes is the size of the data messages InstallSnapshot
	// streams, in bytes. At most MaxMsgBytes-4 KiB.
	SnapshotChunkBytes int
	// MaxMsgBytes is the largest message sent or accepted, in bytes; an
	// AppendEntries batch must fit. The peer gRPC server must be created
	// with ServerOptions for it to apply to incoming messages.
	MaxMsgBytes int
	// MaxInFlight is how many pipelined AppendEntries may await their
	// response at once. 1 disables pipelining (see
	// raft.NetworkTransportConfig.MaxRPCsInFlight for why 2 is the default).
	MaxInFlight int
	// CommitPushDelay is how long after the leader applied an entry its
	// transport waits for raft's own messages to tell a follower that
	// holds it; then it sends the commit index itself (commitpush.go).
	CommitPushDelay time.Duration
	// BatchDelay is how long a pipelined AppendEntries that carries
	// nothing new to its follower (no entries, no newer commit index: the
	// message raft's replication sends an idle group's followers every
	// CommitTimeout) waits to travel with those of other groups to the
	// same node, in one AppendEntriesBatch (batch.go). 0 sends each on its
	// group's stream. It adds to the gap between two messages a follower
	// receives, which must stay well below raft's HeartbeatTimeout and
	// LeaderLeaseTimeout (a node sets it to half its CommitTimeout).
	BatchDelay time.Duration
	// KeepaliveInterval is how often a leader's node tells each node that
	// follows one of its quiet groups (whose raft messages carry nothing
	// new) that it still leads them, in one AppendEntriesBatch of
	// heartbeats per node; raft's messages to those followers are then
	// answered by the transport while a keepalive was answered within
	// two intervals (quiet.go). 0 turns keepalives off: every message is
	// sent. It must stay well below raft's HeartbeatTimeout and
	// LeaderLeaseTimeout (a node sets it to a quarter of the smaller).
	KeepaliveInterval time.Duration
	// Dial, if set, opens the TCP connections to peers instead of a
	// plain net.Dialer (a fault-injecting dialer: internal/faultnet).
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// DialOptions are extra options for every outgoing connection (tests may
	// inject dialers or interceptors). They are applied last.
	DialOptions []grpc.DialOption
}

// DefaultConfig returns the defaults for a node whose peer address is
// advertise.
func DefaultConfig(advertise string) Config {
	return Config{
		Advertise:          advertise,
		DialTimeout:        2 * time.Second,
		ReconnectBackoff:   time.Second,
		RPCTimeout:         5 * time.Second,
		SnapshotTimeout:    10 * time.Minute,
		SnapshotChunkBytes: 1 << 20,
		MaxMsgBytes:        64 << 20,
		MaxInFlight:        2,
		CommitPushDelay:    time.Millisecond,
		BatchDelay:         250 * time.Millisecond,
		KeepaliveInterval:  500 * time.Millisecond,
	}
}

// chunkOverhead is room left in a message for the framing of a snapshot
// chunk.
const chunkOverhead = 4 << 10

// Validate checks c.
func (c Config) Validate() error {
	if c.Advertise == "" {
		return errors.New("transport: Advertise is required")
	}
	if _, port, err := net.SplitHostPort(c.Advertise); err != nil || port == "" {
		return fmt.Errorf("transport: Advertise %q is not host:port", c.Advertise)
	}
	switch {
	case c.DialTimeout <= 0:
		return errors.New("transport: DialTimeout must be positive")
	case c.ReconnectBackoff <= 0:
		return errors.New("transport: ReconnectBackoff must be positive")
	case c.RPCTimeout <= 0:
		return errors.New("transport: RPCTimeout must be positive")
	case c.SnapshotTimeout < c.RPCTimeout:
		return errors.New("transport: SnapshotTimeout must be at least RPCTimeout")
	case c.MaxMsgBytes < 1<<20:
		return errors.New("transport: MaxMsgBytes must be at least 1 MiB")
	case c.SnapshotChunkBytes <= 0 || c.SnapshotChunkBytes > c.MaxMsgBytes-chunkOverhead:
		return errors.New("transport: SnapshotChunkBytes must be positive and at most MaxMsgBytes-4KiB")
	case c.MaxInFlight < 1:
		return errors.New("transport: MaxInFlight must be positive")
	case c.CommitPushDelay < 0:
		return errors.New("transport: CommitPushDelay must not be negative")
	case c.BatchDelay < 0:
		return errors.New("transport: BatchDelay must not be negative")
	case c.KeepaliveInterval < 0:
		return errors.New("transport: KeepaliveInterval must not be negative")
	}
	return nil
}

// ServerOptions are the options the node's peer gRPC server needs for the
// Raft service: message size limits matching MaxMsgBytes.
func (c Config) ServerOptions() []grpc.ServerOption {
	return append([]grpc.ServerOption{
		grpc.MaxRecvMsgSize(c.MaxMsgBytes),
		grpc.MaxSendMsgSize(c.MaxMsgBytes),
	}, grpcopts.ServerOptions()...)
}
