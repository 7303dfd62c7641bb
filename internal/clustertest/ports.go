package clustertest

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strings"
	"sync"
)

// A node restarted on its data keeps its client, peer and gossip
// addresses, so its ports must still be free when it comes back. A port
// the kernel handed out for ":0" lies in the ephemeral range, where any
// outgoing connection of any process (a kvctl run, another test
// package's gRPC client) may take it as its local port in the meantime,
// and the restart then fails with "address already in use". The nodes of
// a test site therefore listen on ports below the ephemeral range, which
// only explicit binds use.

var (
	portsOnce sync.Once
	portLo    int // lowest port handed out
	portHi    int // highest port handed out; 0: use ":0"
	portsMu   sync.Mutex
	portsUsed = map[int]bool{} // handed out by this process
)

// ephemeralLow returns the first port of the kernel's ephemeral range.
func ephemeralLow() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	var lo, hi int
	if _, err := fmt.Sscan(strings.TrimSpace(string(b)), &lo, &hi); err != nil || lo <= 0 {
		return 32768
	}
	return lo
}

// stableAddr returns a loopback address with a port outside the
// ephemeral range that is free for TCP and UDP now (gossip uses both), or
// "127.0.0.1:0" when the range leaves no room.
func stableAddr() string {
	portsOnce.Do(func() {
		if lo := ephemeralLow(); lo > 12000 {
			portLo, portHi = 10000, lo-1
		}
	})
	if portHi == 0 {
		return "127.0.0.1:0"
	}
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := portLo + rand.IntN(portHi-portLo+1)
		if portsUsed[p] {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", p)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		portsUsed[p] = true
		return addr
	}
	return "127.0.0.1:0"
}

// stablePorts gives cfg's client, peer and gossip listeners stable ports
// where it asks for any port.
func stablePorts(client, peer, gossip *string) {
	for _, a := range []*string{client, peer, gossip} {
		if *a == "127.0.0.1:0" {
			*a = stableAddr()
		}
	}
}
