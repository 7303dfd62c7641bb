package delayproxy

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"testing"
	"time"
)

const testDelay = 30 * time.Millisecond

// deadline bounds every socket operation of a test.
const deadline = 10 * time.Second

// echoServer accepts on loopback and echoes what it reads; at EOF it
// closes its side after writing what it read.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(deadline))
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return ln.Addr().String()
}

// startProxy starts a proxy to target with testDelay, closed at the end of
// the test.
func startProxy(t *testing.T, target string) *Proxy {
	t.Helper()
	p, err := Listen("127.0.0.1:0", target, testDelay)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	t.Cleanup(func() { p.Close() })
	return p
}

func dial(t *testing.T, addr string) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, deadline)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(deadline)); err != nil {
		t.Fatal(err)
	}
	return c.(*net.TCPConn)
}

// TestRoundTripDelayed checks that a message comes back through the proxy
// and an echo server no earlier than two one-way delays after it was
// sent.
func TestRoundTripDelayed(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr().String())
	for i := range 3 {
		msg := []byte{'p', 'i', 'n', 'g', byte('0' + i)}
		start := time.Now()
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 2*testDelay {
			t.Errorf("round trip %d took %v, want at least 2 × %v", i, el, testDelay)
		}
		if !bytes.Equal(got, msg) {
			t.Fatalf("got %q, want %q", got, msg)
		}
	}
}

// TestOneWayDelayed checks each direction on its own: a sink behind the
// proxy receives a message no earlier than one delay after it was sent,
// and a message the server sends reaches the client no earlier than one
// delay after it was written.
func TestOneWayDelayed(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	p := startProxy(t, ln.Addr().String())
	c := dial(t, p.Addr().String())
	type stamped struct {
		at  time.Time
		err error
	}
	srv := make(chan net.Conn, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			close(srv)
			return
		}
		_ = s.SetDeadline(time.Now().Add(deadline))
		srv <- s
	}()
	sent := time.Now()
	if _, err := c.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	s, ok := <-srv
	if !ok {
		t.Fatal("accept failed")
	}
	defer s.Close()
	got := make(chan stamped, 1)
	go func() {
		b := make([]byte, 1)
		_, err := io.ReadFull(s, b)
		got <- stamped{time.Now(), err}
	}()
	r := <-got
	if r.err != nil {
		t.Fatal(r.err)
	}
	if el := r.at.Sub(sent); el < testDelay {
		t.Errorf("client to server took %v, want at least %v", el, testDelay)
	}
	sent = time.Now()
	if _, err := s.Write([]byte("y")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(sent); el < testDelay {
		t.Errorf("server to client took %v, want at least %v", el, testDelay)
	}
}

// TestOrderAndBulk streams a few megabytes written in chunks of random
// sizes, concurrently with reading them back through the echo server, and
// checks every byte arrives in order.
func TestOrderAndBulk(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr().String())
	data := make([]byte, 4<<20)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(rng.IntN(256))
	}
	werr := make(chan error, 1)
	go func() {
		rest := data
		for len(rest) > 0 {
			n := min(len(rest), 1+rng.IntN(100<<10))
			if _, err := c.Write(rest[:n]); err != nil {
				werr <- err
				return
			}
			rest = rest[n:]
		}
		werr <- c.CloseWrite()
	}()
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatalf("got %d bytes back, want the %d sent in order", len(got), len(data))
	}
}

// TestHalfClose checks that the end of one direction is passed on (as a
// half-close) while the other direction still carries data.
func TestHalfClose(t *testing.T) {
	p := startProxy(t, echoServer(t))
	c := dial(t, p.Addr().String())
	if _, err := c.Write([]byte("last words")); err != nil {
		t.Fatal(err)
	}
	if err := c.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	// The echo server sees EOF only through the proxy's half-close, then
	// writes back what it read and closes.
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != "last words" {
		t.Fatalf("got %q", got)
	}
}

// TestCloseEndsConnections checks that Close ends open connections (their
// reads see an end, not a hang) and that the listener stops accepting.
func TestCloseEndsConnections(t *testing.T) {
	p, err := Listen("127.0.0.1:0", echoServer(t), testDelay)
	if err != nil {
		t.Fatal(err)
	}
	p.Start()
	c := dial(t, p.Addr().String())
	if _, err := c.Write([]byte("a")); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Read(b); err == nil {
		t.Fatal("read after Close succeeded")
	} else if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read after Close hung until the deadline: %v", err)
	}
	if c2, err := net.DialTimeout("tcp", p.Addr().String(), time.Second); err == nil {
		c2.Close()
		t.Fatal("the proxy still accepts after Close")
	}
	if err := p.Close(); err != nil { // idempotent
		t.Fatal(err)
	}
}

// TestTargetDown checks that a connection whose target refuses is closed.
func TestTargetDown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	ln.Close()
	p := startProxy(t, target)
	c := dial(t, p.Addr().String())
	b := make([]byte, 1)
	if _, err := c.Read(b); err == nil {
		t.Fatal("read from a proxied connection whose target is down succeeded")
	} else if ne := (net.Error)(nil); errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read hung until the deadline: %v", err)
	}
}

func TestNegativeDelay(t *testing.T) {
	if _, err := Listen("127.0.0.1:0", "127.0.0.1:1", -time.Millisecond); err == nil {
		t.Fatal("Listen accepted a negative delay")
	}
}
