package grpcwin

import (
	"context"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"google.golang.org/grpc"
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
