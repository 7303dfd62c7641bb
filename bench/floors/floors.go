// Package floors measures the latency floors a replicated write or a remote
// read cannot beat on this machine: the data disk's fdatasync and a
// loopback gRPC round trip.
package floors

import (
	"context"
	"fmt"
	"net"
	"os"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// Result is a latency floor.
type Result struct {
	// What was measured ("fdatasync of 4 KiB writes", ...).
	Method  string  `json:"method"`
	Dir     string  `json:"dir,omitempty"`
	Samples int64   `json:"samples"`
	P50Ms   float64 `json:"p50_ms"`
	P99Ms   float64 `json:"p99_ms"`
	MaxMs   float64 `json:"max_ms"`
}

// Floors are both floors of one run.
type Floors struct {
	Fsync    Result `json:"fsync"`
	GRPCEcho Result `json:"grpc_echo"`
}

func newHist() *hdrhistogram.Histogram {
	return hdrhistogram.New(1, int64(time.Minute/time.Microsecond), 3)
}

func record(h *hdrhistogram.Histogram, d time.Duration) {
	_ = h.RecordValue(min(max(d.Microseconds(), 1), h.HighestTrackableValue()))
}

func fill(r *Result, h *hdrhistogram.Histogram) {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	r.Samples = h.TotalCount()
	if r.Samples > 0 {
		r.P50Ms, r.P99Ms, r.MaxMs = ms(h.ValueAtQuantile(50)), ms(h.ValueAtQuantile(99)), ms(h.Max())
	}
}

// fsyncBlock is the size of each probe write.
const fsyncBlock = 4096

// Fsync writes 4 KiB blocks at increasing offsets of a temporary file in
// dir and forces each to disk (fdatasync on Linux, fsync elsewhere), n
// times or until maxDur has passed. The file is removed afterwards.
func Fsync(dir string, n int, maxDur time.Duration) (Result, error) {
	res := Result{Method: "4 KiB write at increasing offsets + " + SyncMethod, Dir: dir}
	if n < 1 {
		return res, fmt.Errorf("fsync probe: n must be positive")
	}
	f, err := os.CreateTemp(dir, ".fsync-probe-*")
	if err != nil {
		return res, fmt.Errorf("fsync probe: %w", err)
	}
	defer func() {
		f.Close()
		os.Remove(f.Name())
	}()
	block := make([]byte, fsyncBlock)
	for i := range block {
		block[i] = byte(i*7 + 1)
	}
	h := newHist()
	deadline := time.Now().Add(maxDur)
	for i := 0; i < n; i++ {
		if i > 0 && time.Now().After(deadline) {
			break
		}
		start := time.Now()
		if _, err := f.WriteAt(block, int64(i)*fsyncBlock); err != nil {
			return res, fmt.Errorf("fsync probe: write: %w", err)
		}
		if err := datasync(f); err != nil {
			return res, fmt.Errorf("fsync probe: %s: %w", SyncMethod, err)
		}
		record(h, time.Since(start))
	}
	fill(&res, h)
	return res, nil
}

// GRPCEcho starts a gRPC server with the standard health service on a
// loopback port and measures n sequential Check round trips from a client
// in the same process over TCP (after 200 unmeasured ones), or as many as
// fit in maxDur.
func GRPCEcho(ctx context.Context, n int, maxDur time.Duration) (Result, error) {
	res := Result{Method: "gRPC health Check round trip over loopback TCP, 1 client, sequential"}
	if n < 1 {
		return res, fmt.Errorf("grpc echo: n must be positive")
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return res, fmt.Errorf("grpc echo: %w", err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, health.NewServer())
	go srv.Serve(lis)
	defer srv.Stop()
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return res, fmt.Errorf("grpc echo: %w", err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx, cancel := context.WithTimeout(ctx, maxDur+10*time.Second)
	defer cancel()
	for range 200 {
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return res, fmt.Errorf("grpc echo: %w", err)
		}
	}
	h := newHist()
	deadline := time.Now().Add(maxDur)
	for i := 0; i < n; i++ {
		if i > 0 && time.Now().After(deadline) {
			break
		}
		start := time.Now()
		if _, err := hc.Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
			return res, fmt.Errorf("grpc echo: %w", err)
		}
		record(h, time.Since(start))
	}
	fill(&res, h)
	return res, nil
}
