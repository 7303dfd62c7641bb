package clustertest

import (
	"context"
	"fmt"
	"testing"

	"github.com/causeway-db/causeway/client"
)

// BenchmarkRequestPath runs Gets and Puts of 1 KiB values from one client
// against a 3-node site in this process, so that its allocations per
// operation (go test -bench RequestPath -benchmem) count every node's
// work for a request: the gRPC edge, the router, raft's replication, the
// state machine and the client library. Allocations are the figure to
// compare across builds; the times are a noisy machine's.
func BenchmarkRequestPath(b *testing.B) {
	c := New(b, 3, nil)
	cfg := client.DefaultConfig()
	for _, n := range c.Live() {
		cfg.Endpoints = append(cfg.Endpoints, n.Srv.ClientAddr())
	}
	ctx := context.Background()
	cl, err := client.New(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { cl.Close() })
	const keys = 1000
	value := make([]byte, 1024)
	for i := range keys {
		if _, err := cl.Put(ctx, benchKey(i), value); err != nil {
			b.Fatal(err)
		}
	}
	b.Run("Put", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			if _, err := cl.Put(ctx, benchKey(i%keys), value); err != nil {
				b.Fatal(err)
			}
		}
	})
	for name, cons := range map[string]client.Consistency{"Causal": client.Causal, "Strong": client.Strong} {
		b.Run("Get/"+name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if _, err := cl.Get(ctx, benchKey(i%keys), client.WithConsistency(cons)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func benchKey(i int) []byte { return fmt.Appendf(nil, "user%06d", i) }
