package core

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// ClientsPerConn is how many client goroutines share one connection by
// default.
const ClientsPerConn = 8

// ConnCount is the number of connections for clients client goroutines,
// perConn to a connection (0 means ClientsPerConn): at least one, rounded
// up to a multiple of the endpoints so that each endpoint gets the same
// number.
func ConnCount(clients, perConn, endpoints int) int {
	if perConn <= 0 {
		perConn = ClientsPerConn
	}
	n := max((clients+perConn-1)/perConn, 1)
	if endpoints > 0 {
		n = (n + endpoints - 1) / endpoints * endpoints
	}
	return n
}

// Pool is a set of gRPC connections shared round-robin by client
// goroutines.
type Pool struct {
	conns []*grpc.ClientConn
	kvs   []kvv1.KVClient
}

// Dial opens ConnCount(clients, perConn, len(endpoints)) connections;
// connection j goes to endpoint j mod len(endpoints). Client i uses
// connection i mod Conns, hence endpoint i mod len(endpoints).
func Dial(endpoints []string, clients, perConn int) (*Pool, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("dial: no endpoints")
	}
	p := &Pool{}
	for j := range ConnCount(clients, perConn, len(endpoints)) {
		ep := endpoints[j%len(endpoints)]
		conn, err := grpc.NewClient(ep, grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(256<<20)))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("dial %s: %w", ep, err)
		}
		conn.Connect()
		p.conns = append(p.conns, conn)
		p.kvs = append(p.kvs, kvv1.NewKVClient(conn))
	}
	return p, nil
}

// Conns is the number of connections.
func (p *Pool) Conns() int { return len(p.conns) }

// Conn returns the connection of client goroutine i.
func (p *Pool) Conn(i int) *grpc.ClientConn { return p.conns[i%len(p.conns)] }

// KV returns the KV client of client goroutine i; it is pinned to one
// connection and so to one endpoint.
func (p *Pool) KV(i int) kvv1.KVClient { return p.kvs[i%len(p.kvs)] }

// Close closes every connection and returns the first error.
func (p *Pool) Close() error {
	var first error
	for _, c := range p.conns {
		if err := c.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}
