// Package grpcopts holds the transport options of every gRPC connection
// Causeway makes or serves: clients, peer calls, the raft transport.
//
// Flow-control windows. gRPC's default dynamic windows come with
// bandwidth-delay-product estimation: the receiver of a data frame sends a
// PING after it, and again after every acknowledgement while data keeps
// arriving, so a busy connection carries a PING and its acknowledgement
// per round trip, each a frame to write and read on both ends. Causeway's
// messages are small and its connections few and long-lived: static
// windows large enough for snapshot chunks at WAN latency remove the
// PINGs (docs/adr/020, step 37).
//
// Keepalive. A connection whose link stopped carrying packets without a
// reset (a cable pulled, a container taken off its network) stays open:
// the kernel retransmits with a backoff that grows to two minutes, so a
// healed link can go unused for that long. The dialer pings an idle
// connection after KeepaliveTime and closes it when the answer does not
// come within KeepaliveTimeout; the next call dials again. Servers accept
// such pings (gRPC's default policy answers a client that pings more than
// every five minutes by closing the connection).
package grpcopts

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

const (
	// StreamWindow is the flow-control window of one stream: 4 MiB, a
	// few snapshot chunks, 40 MiB/s per stream at 100 ms of round trip.
	StreamWindow = 4 << 20
	// ConnWindow is the window of a connection, shared by its streams.
	ConnWindow = 16 << 20

	// KeepaliveTime is how long a connection may go without reading
	// anything before the dialer pings it (gRPC's floor is 10 s).
	KeepaliveTime = 10 * time.Second
	// KeepaliveTimeout is how long the dialer waits for the ping's
	// answer before it closes the connection.
	KeepaliveTimeout = 5 * time.Second
	// minPingInterval is the most often a server lets a client ping.
	minPingInterval = 5 * time.Second
)

// DialOptions returns the options of every connection Causeway dials.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithStaticStreamWindowSize(StreamWindow),
		grpc.WithStaticConnWindowSize(ConnWindow),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: KeepaliveTime, Timeout: KeepaliveTimeout, PermitWithoutStream: true}),
	}
}

// ServerOptions returns the options of every gRPC server of kvd.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.StaticStreamWindowSize(StreamWindow),
		grpc.StaticConnWindowSize(ConnWindow),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: minPingInterval, PermitWithoutStream: true}),
	}
}
