package bench

import (
	"fmt"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
)

// ClientsPerConn is how many client goroutines share one gRPC connection.
const ClientsPerConn = 8

// Pool is a small set of gRPC connections shared round-robin by client
// goroutines.
type Pool struct {
	conns []*grpc.ClientConn
	kvs   []kvv1.KVClient
}

// Dial opens one connection per ClientsPerConn clients (at least one),
// rounded up to a multiple of the endpoints so that each endpoint gets the
// same number; connection i goes to endpoint i mod len(endpoints). Client
// i uses connection i mod Conns, hence endpoint i mod len(endpoints).
func Dial(endpoints []string, clients int) (*Pool, error) {
	if len(endpoints) == 0 {
		return nil, fmt.Errorf("dial: no endpoints")
	}
	n := (clients + ClientsPerConn - 1) / ClientsPerConn
	n = max(n, 1)
	n = (n + len(endpoints) - 1) / len(endpoints) * len(endpoints)
	p := &Pool{}
	for i := 0; i < n; i++ {
		conn, err := grpc.NewClient(endpoints[i%len(endpoints)],
			grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20+2<<20)))
		if err != nil {
			p.Close()
			return nil, fmt.Errorf("dial %s: %w", endpoints[i%len(endpoints)], err)
		}
		conn.Connect()
		p.conns = append(p.conns, conn)
		p.kvs = append(p.kvs, kvv1.NewKVClient(conn))
	}
	return p, nil
}

// Conns is the number of connections.
func (p *Pool) Conns() int { return len(p.conns) }

// KV returns the client for client goroutine i; it is pinned to one
// connection and so to one endpoint.
func (p *Pool) KV(i int) kvv1.KVClient { return p.kvs[i%len(p.kvs)] }

// Close closes every connection.
func (p *Pool) Close() {
	for _, c := range p.conns {
		c.Close()
	}
}
