// Package grpcwin holds the HTTP/2 flow-control windows of every gRPC
// connection Causeway makes or serves (clients, peers, raft transport).
//
// gRPC's default dynamic windows come with bandwidth-delay-product
// estimation: the receiver of a data frame sends a PING after it, and
// again after every acknowledgement while data keeps arriving, so a busy
// connection carries a PING and its acknowledgement per round trip, each
// a frame to write and read on both ends. Causeway's messages are small
// and its connections are few and long-lived; static windows large enough
// for a snapshot chunk at WAN latency remove the PINGs (docs/adr/020).
package grpcwin

import "google.golang.org/grpc"

const (
	// StreamWindow is the flow-control window of one stream: 4 MiB, a
	// few snapshot chunks, 40 MiB/s per stream at 100 ms of round trip.
	StreamWindow = 4 << 20
	// ConnWindow is the window of a connection, shared by its streams.
	ConnWindow = 16 << 20
)

// DialOptions returns the dial options that set the windows.
func DialOptions() []grpc.DialOption {
	return []grpc.DialOption{grpc.WithStaticStreamWindowSize(StreamWindow), grpc.WithStaticConnWindowSize(ConnWindow)}
}

// ServerOptions returns the server options that set the windows.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(StreamWindow), grpc.StaticConnWindowSize(ConnWindow)}
}
