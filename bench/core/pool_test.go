package core

import (
	"strings"
	"testing"
)

func TestConnCount(t *testing.T) {
	for _, c := range []struct{ clients, per, eps, want int }{
		{1, 0, 1, 1}, {8, 0, 1, 1}, {9, 0, 1, 2}, {64, 0, 3, 9}, {64, 0, 1, 8}, {1, 0, 3, 3}, {10, 2, 1, 5}, {10, 2, 0, 5},
	} {
		if got := ConnCount(c.clients, c.per, c.eps); got != c.want {
			t.Errorf("ConnCount(%d, %d, %d) = %d, want %d", c.clients, c.per, c.eps, got, c.want)
		}
	}
}

// Clients are spread round-robin over the endpoints, each pinned to one.
func TestDialSpreadsClients(t *testing.T) {
	eps := []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"}
	p, err := Dial(eps, 64, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if p.Conns() != 9 {
		t.Fatalf("%d connections for 64 clients on 3 endpoints, want 9", p.Conns())
	}
	for i := range 64 {
		if got := p.Conn(i).CanonicalTarget(); !strings.HasSuffix(got, eps[i%3]) {
			t.Errorf("client %d goes to %s, want %s", i, got, eps[i%3])
		}
		if p.KV(i) != p.kvs[i%9] {
			t.Errorf("client %d's KV client is not its connection's", i)
		}
	}
	if _, err := Dial(nil, 1, 0); err == nil {
		t.Error("no endpoints accepted")
	}
}
