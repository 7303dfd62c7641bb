package grpcopts

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// pingCounter is a listener whose connections count the HTTP/2 PING
// frames (not acknowledgements) the server reads.
type pingCounter struct {
	net.Listener
	pings atomic.Int64
	wg    sync.WaitGroup
}

func (l *pingCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer pr.Close()
		if _, err := io.ReadFull(pr, make([]byte, len(http2.ClientPreface))); err != nil {
			return
		}
		fr := http2.NewFramer(nil, pr)
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if p, ok := f.(*http2.PingFrame); ok && !p.IsAck() {
				l.pings.Add(1)
			}
		}
	}()
	return &teeConn{Conn: c, w: pw}, nil
}

type teeConn struct {
	net.Conn
	w *io.PipeWriter
}

func (c *teeConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if n > 0 {
		_, _ = c.w.Write(b[:n])
	}
	return n, err
}

func (c *teeConn) Close() error {
	_ = c.w.Close()
	return c.Conn.Close()
}

// clientPings makes 300 calls over one connection and returns how many
// PINGs the client sent.
func clientPings(t *testing.T, dial []grpc.DialOption, serve []grpc.ServerOption) int64 {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := &pingCounter{Listener: lis}
	srv := grpc.NewServer(serve...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(l) }()
	conn, err := grpc.NewClient(lis.Addr().String(), append(dial, grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	hc := healthpb.NewHealthClient(conn)
	for range 300 {
		if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_ = conn.Close()
	srv.Stop()
	l.wg.Wait()
	return l.pings.Load()
}

// TestStaticWindowsSendNoPings: gRPC's default windows make a client
// send a PING after the data frames of its calls (bandwidth-delay
// estimation); with the windows of this package it sends none.
func TestStaticWindowsSendNoPings(t *testing.T) {
	if n := clientPings(t, nil, nil); n == 0 {
		t.Fatal("with gRPC's default windows the client sent no PING: the test sees nothing")
	}
	if n := clientPings(t, DialOptions(), ServerOptions()); n != 0 {
		t.Fatalf("with static windows the client sent %d PINGs", n)
	}
}

// blackhole forwards TCP connections to target until cut, then reads and
// drops whatever arrives in either direction: a link that stopped
// carrying packets without a reset.
type blackhole struct {
	net.Listener
	target string
	cut    atomic.Bool
	wg     sync.WaitGroup
}

func (b *blackhole) serve() {
	for {
		c, err := b.Accept()
		if err != nil {
			return
		}
		s, err := net.Dial("tcp", b.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		pipe := func(dst, src net.Conn) {
			defer b.wg.Done()
			defer dst.Close()
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if err != nil {
					return
				}
				if !b.cut.Load() {
					if _, err := dst.Write(buf[:n]); err != nil {
						return
					}
				}
			}
		}
		b.wg.Add(2)
		go pipe(s, c)
		go pipe(c, s)
	}
}

// TestKeepaliveClosesASilentConnection: a connection whose link goes
// silent is closed by the dialer's keepalive within KeepaliveTime +
// KeepaliveTimeout, and the next call, once the link is back, goes
// through a new one. Without the keepalive the connection stays READY,
// and calls wait on it, for as long as the kernel keeps it.
func TestKeepaliveClosesASilentConnection(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for a keepalive")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(ServerOptions()...)
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	plis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bh := &blackhole{Listener: plis, target: lis.Addr().String()}
	go bh.serve()
	defer func() { _ = plis.Close(); srv.Stop(); bh.wg.Wait() }()

	conn, err := grpc.NewClient(plis.Addr().String(), append(DialOptions(), grpc.WithTransportCredentials(insecure.NewCredentials()))...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	if _, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatal(err)
	}
	bh.cut.Store(true)
	deadline := time.Now().Add(KeepaliveTime + KeepaliveTimeout + 10*time.Second)
	for conn.GetState() == connectivity.Ready {
		if time.Now().After(deadline) {
			t.Fatalf("the connection is still READY %v after its link went silent", KeepaliveTime+KeepaliveTimeout+10*time.Second)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn.WaitForStateChange(ctx, connectivity.Ready)
		cancel()
	}
	bh.cut.Store(false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}, grpc.WaitForReady(true)); err != nil {
		t.Fatalf("a call after the link came back: %v", err)
	}
}
