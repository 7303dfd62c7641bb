package clustertest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"

	"github.com/causeway-db/causeway/client"
	"github.com/causeway-db/causeway/internal/placement"
	"github.com/causeway-db/causeway/internal/poll"
)

// freezer dials the client's connections; the connections to a frozen
// address carry nothing either way until thawed, as those to a process
// stopped with SIGSTOP: the kernel keeps them open, and no call on them
// fails or gets an answer.
type freezer struct {
	mu     sync.Mutex
	frozen map[string]chan struct{} // closed when thawed
}

func newFreezer() *freezer { return &freezer{frozen: map[string]chan struct{}{}} }

func (f *freezer) dial(ctx context.Context, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	return &frozenConn{Conn: c, f: f, addr: addr, closed: make(chan struct{})}, nil
}

// Freeze stops the traffic of every connection to addr.
func (f *freezer) Freeze(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.frozen[addr]; !ok {
		f.frozen[addr] = make(chan struct{})
	}
}

// ThawAll lets every connection carry its traffic again.
func (f *freezer) ThawAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for a, ch := range f.frozen {
		close(ch)
		delete(f.frozen, a)
	}
}

// wait blocks while addr is frozen, until closed is.
func (f *freezer) wait(addr string, closed chan struct{}) {
	f.mu.Lock()
	ch, ok := f.frozen[addr]
	f.mu.Unlock()
	if ok {
		select {
		case <-ch:
		case <-closed:
		}
	}
}

type frozenConn struct {
	net.Conn
	f         *freezer
	addr      string
	closed    chan struct{}
	closeOnce sync.Once
}

func (c *frozenConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.f.wait(c.addr, c.closed) // what arrived is held while frozen
	return n, err
}

func (c *frozenConn) Write(b []byte) (int, error) {
	c.f.wait(c.addr, c.closed)
	return c.Conn.Write(b)
}

func (c *frozenConn) Close() error {
	c.closeOnce.Do(func() { close(c.closed) })
	return c.Conn.Close()
}

// TestWriteToASilentLeaderGoesToTheEndpoint: the Go client sends a write
// straight to its shard's leader, and that node goes silent (stopped
// with SIGSTOP: its connections stay open, nothing on them is answered;
// here its client connections freeze and its links to the other nodes are
// cut). The write waited for its whole attempt (RequestTimeout, 10 s by
// default) while the other replicas elected a leader in 2 to 6 s. The
// client probes a leader that does not answer, gives up on it within 2 s
// and goes on at its endpoint, which forwards the write to the new
// leader. So does a write whose client's current endpoint is the silent
// node: it fails over to the next endpoint. Each write is applied once.
func TestWriteToASilentLeaderGoesToTheEndpoint(t *testing.T) {
	c := New(t, 3, nil)
	c.WaitSettled(60 * time.Second)
	ctx := ctxT(t, 2*time.Minute)
	n1 := c.Node("n1")

	fz := newFreezer()
	t.Cleanup(fz.ThawAll)
	cfg := client.DefaultConfig()
	cfg.Endpoints = []string{n1.Srv.ClientAddr()}
	// No attempt of the write ends on its own, nor does the connection's
	// keepalive drop the silent connection (15 s): only the probe can take
	// the write off the silent node before the caller's deadline.
	cfg.RequestTimeout = 10 * time.Minute
	cfg.DialOptions = []grpc.DialOption{grpc.WithContextDialer(fz.dial), grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Minute})}
	cl, err := client.New(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	waitDirect(t, ctx, c, cl, "before")

	// A key whose shard another node leads.
	var victim *Node
	var key []byte
	for _, n := range c.Live() {
		if n == n1 || victim != nil {
			continue
		}
		for _, g := range n.Srv.Groups() {
			if g.IsLeader() && g.ID().Keyspace == "default" {
				sh := placement.Shard{Keyspace: "default", ID: g.ID().Shard}
				for i := 0; key == nil; i++ {
					k := []byte(fmt.Sprint("silent-leader/", i))
					if s, _ := n1.Srv.Router().Shard("default", k); s == sh {
						key = k
					}
				}
				victim = n
				break
			}
		}
	}
	if victim == nil {
		t.Fatal("no shard led by a node other than n1")
	}
	// A second client, without leader routing, on the victim first: its
	// connection to the victim is open when the victim goes silent.
	cfg2 := cfg
	cfg2.Endpoints = []string{victim.Srv.ClientAddr(), n1.Srv.ClientAddr()}
	cfg2.DisableLeaderRouting = true
	cl2, err := client.New(ctx, cfg2)
	if err != nil {
		t.Fatal(err)
	}
	defer cl2.Close()
	if _, err := cl2.Put(ctx, []byte("silent-leader/warm"), []byte("v")); err != nil {
		t.Fatal(err)
	}
	fz.Freeze(victim.Srv.ClientAddr())
	c.Isolate(victim)
	t.Logf("%s, the leader of the shard of %q, is silent", victim.ID, key)

	// Far longer than the probe and an election take; without the probe
	// the write waits on the silent node until this deadline.
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	start := time.Now()
	_, err = cl.Put(wctx, key, []byte("v"))
	cancel()
	if err != nil {
		t.Fatalf("write whose shard leader went silent: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("the write took %v", time.Since(start).Round(time.Millisecond))

	// A client whose current endpoint is the silent node (without leader
	// routing, every call goes there first) fails over to its next
	// endpoint once the node answers no probe, rather than wait for its
	// attempt's end.
	key2 := append(append([]byte(nil), key...), "/endpoint"...)
	wctx, cancel = context.WithTimeout(ctx, 30*time.Second)
	start = time.Now()
	_, err = cl2.Put(wctx, key2, []byte("v"))
	cancel()
	if err != nil {
		t.Fatalf("write to a silent endpoint: %v (after %v)", err, time.Since(start).Round(time.Millisecond))
	}
	t.Logf("the write to the silent endpoint took %v", time.Since(start).Round(time.Millisecond))

	c.Heal()
	fz.ThawAll()
	for _, k := range [][]byte{key, key2} {
		poll.Every(100*time.Millisecond).Until(t, 30*time.Second, "the key's history", func() error {
			h, err := cl.History(ctx, k, 10, client.WithConsistency(client.Strong))
			if err != nil {
				return err
			}
			if len(h) != 1 {
				t.Fatalf("%q has %d versions, want the write's one", k, len(h))
			}
			return nil
		})
	}
}
