package faultnet

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
)

var (
	epA = Endpoint{Site: "s1", Node: "a"}
	epB = Endpoint{Site: "s1", Node: "b"}
	epC = Endpoint{Site: "s2", Node: "c"}
)

// echoServer accepts connections on loopback and echoes what it reads.
func echoServer(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); _, _ = io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func dial(t *testing.T, h *Host, addr string) net.Conn {
	t.Helper()
	c, err := h.Dial(context.Background(), addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// roundTrip writes msg and reads its echo, returning how long it took.
func roundTrip(t *testing.T, c net.Conn, msg []byte) time.Duration {
	t.Helper()
	start := time.Now()
	if _, err := c.Write(msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if err := c.SetReadDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, msg) {
		t.Fatalf("echo %q, want %q", got, msg)
	}
	return time.Since(start)
}

func TestHealthyLinkPassesThrough(t *testing.T) {
	n := New(DefaultConfig(1))
	addr := echoServer(t)
	n.Register(addr, epB)
	c := dial(t, n.Host(epA, nil), addr)
	for i := 0; i < 100; i++ {
		roundTrip(t, c, []byte{byte(i), 1, 2, 3})
	}
}

// A delay applies to each direction at least once; writes keep their
// order under jitter.
func TestDelayKeepsOrder(t *testing.T) {
	n := New(DefaultConfig(2))
	addr := echoServer(t)
	n.Register(addr, epB)
	n.Delay(epA, epB, 20*time.Millisecond, 30*time.Millisecond)
	n.Delay(epB, epA, 10*time.Millisecond, 0)
	c := dial(t, n.Host(epA, nil), addr)
	if d := roundTrip(t, c, []byte("hello")); d < 30*time.Millisecond {
		t.Fatalf("round trip %v: below the 30ms of delay", d)
	}
	var want []byte
	for i := 0; i < 200; i++ {
		b := []byte{byte(i), byte(i >> 8)}
		want = append(want, b...)
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("delayed writes were reordered")
	}
}

// A partition holds stream data (in both directions of a connection) until
// it heals, then delivers it; new connections fail while it lasts.
func TestPartitionHoldsThenHeals(t *testing.T) {
	n := New(DefaultConfig(3))
	addr := echoServer(t)
	n.Register(addr, epB)
	h := n.Host(epA, nil)
	c := dial(t, h, addr)
	roundTrip(t, c, []byte("before"))

	for _, cut := range []func(){
		func() { n.Partition(epA, epB) },
		func() { n.Cut(epA, epB) }, // requests held
		func() { n.Cut(epB, epA) }, // replies held
	} {
		cut()
		if _, err := h.Dial(context.Background(), addr); !errors.Is(err, ErrPartitioned) {
			t.Fatalf("dial across a partition: %v", err)
		}
		if _, err := c.Write([]byte("during")); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 6)
		_ = c.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
		if k, err := c.Read(buf); !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("read across a partition: %d bytes, %v", k, err)
		}
		n.Heal()
		_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "during" {
			t.Fatalf("after healing: %q, %v", buf, err)
		}
	}
}

// Site rules apply to every node pair across the sites and combine with
// node rules.
func TestSiteRules(t *testing.T) {
	n := New(DefaultConfig(4))
	addr := echoServer(t)
	n.Register(addr, epC)
	n.PartitionSites("s1", "s2")
	h := n.Host(epA, nil)
	if _, err := h.Dial(context.Background(), addr); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("dial across a site partition: %v", err)
	}
	n.Heal()
	n.DelaySites("s1", "s2", 25*time.Millisecond, 0)
	n.Delay(epA, epC, 25*time.Millisecond, 0)
	c := dial(t, h, addr)
	if d := roundTrip(t, c, []byte("x")); d < 50*time.Millisecond {
		t.Fatalf("round trip %v: below the 50ms of combined delay", d)
	}
	if err := n.SetRule(epA, epC, Rule{Loss: 2}); err == nil {
		t.Fatal("loss 2 accepted")
	}
}

// Close delivers writes already made, then closes.
func TestCloseFlushesDelayedWrites(t *testing.T) {
	n := New(DefaultConfig(5))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	n.Register(ln.Addr().String(), epB)
	n.Delay(epA, epB, 30*time.Millisecond, 0)
	got := make(chan []byte, 1)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer s.Close()
		b, _ := io.ReadAll(s)
		got <- b
	}()
	c, err := n.Host(epA, nil).Dial(context.Background(), ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("last words"))
	_ = c.Close()
	if _, err := c.Write([]byte("x")); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("write after close: %v", err)
	}
	if b := <-got; string(b) != "last words" {
		t.Fatalf("peer read %q", b)
	}
}

// fakeTransport records the packets memberlist would send.
type fakeTransport struct {
	memberlist.NodeAwareTransport
	sent chan []byte
}

func (f *fakeTransport) WriteToAddress(b []byte, _ memberlist.Address) (time.Time, error) {
	f.sent <- b
	return time.Now(), nil
}

func TestGossipPackets(t *testing.T) {
	n := New(DefaultConfig(6))
	n.Register("10.0.0.2:7946", epB)
	inner := &fakeTransport{sent: make(chan []byte, 100)}
	tr := n.Host(epA, nil).Transport(inner)
	if _, err := tr.WriteTo([]byte("p1"), "10.0.0.2:7946"); err != nil {
		t.Fatal(err)
	}
	if b := <-inner.sent; string(b) != "p1" {
		t.Fatalf("sent %q", b)
	}
	n.Cut(epA, epB)
	for i := 0; i < 10; i++ {
		_, _ = tr.WriteTo([]byte("dropped"), "10.0.0.2:7946")
	}
	if _, err := tr.DialTimeout("10.0.0.2:7946", time.Second); !errors.Is(err, ErrPartitioned) {
		t.Fatalf("gossip dial across a partition: %v", err)
	}
	n.Heal()
	n.Delay(epA, epB, 20*time.Millisecond, 0)
	start := time.Now()
	_, _ = tr.WriteTo([]byte("late"), "10.0.0.2:7946")
	if b := <-inner.sent; string(b) != "late" {
		t.Fatalf("sent %q: a dropped packet was delivered", b)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("delayed packet sent after %v", d)
	}
	n.Heal()
	_ = n.SetRule(epA, epB, Rule{Loss: 1})
	_, _ = tr.WriteTo([]byte("lost"), "10.0.0.2:7946")
	select {
	case b := <-inner.sent:
		t.Fatalf("packet %q sent despite loss 1", b)
	default:
	}
}
