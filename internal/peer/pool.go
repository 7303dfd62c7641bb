package peer

import (
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	kvv1 "github.com/causeway-db/causeway/api/proto/kv/v1"
	peerv1 "github.com/causeway-db/causeway/api/proto/peer/v1"
	"github.com/causeway-db/causeway/internal/grpcopts"
)

// Pool caches one client connection per peer address. Safe for concurrent
// use.
type Pool struct {
	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // REQUIRES: mu
	opts  []grpc.DialOption
}

// NewPool returns an empty pool.
func NewPool(opts ...grpc.DialOption) *Pool {
	base := append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, grpcopts.DialOptions()...)
	return &Pool{conns: map[string]*grpc.ClientConn{}, opts: append(base, opts...)}
}

// Conn returns the connection to addr, dialing lazily.
func (p *Pool) Conn(addr string) (*grpc.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if c, ok := p.conns[addr]; ok {
		return c, nil
	}
	c, err := grpc.NewClient(addr, p.opts...)
	if err != nil {
		return nil, err
	}
	p.conns[addr] = c
	return c, nil
}

// KV returns a kv.v1 client for the node at peer address addr.
func (p *Pool) KV(addr string) (kvv1.KVClient, error) {
	c, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	return kvv1.NewKVClient(c), nil
}

// Node returns a peer.v1 Node client for addr.
func (p *Pool) Node(addr string) (peerv1.NodeClient, error) {
	c, err := p.Conn(addr)
	if err != nil {
		return nil, err
	}
	return peerv1.NewNodeClient(c), nil
}

// Close closes every connection.
func (p *Pool) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for a, c := range p.conns {
		_ = c.Close()
		delete(p.conns, a)
	}
}
