package floors

import (
	"context"
	"testing"
	"time"
)

func TestFsync(t *testing.T) {
	r, err := Fsync(t.TempDir(), 20, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples < 1 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms || r.MaxMs < r.P99Ms {
		t.Fatalf("implausible result %+v", r)
	}
	if _, err := Fsync(t.TempDir(), 0, time.Second); err == nil {
		t.Fatal("n = 0 accepted")
	}
}

func TestGRPCEcho(t *testing.T) {
	r, err := GRPCEcho(context.Background(), 100, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if r.Samples < 1 || r.P50Ms <= 0 || r.P99Ms < r.P50Ms {
		t.Fatalf("implausible result %+v", r)
	}
}
