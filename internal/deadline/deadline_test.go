package deadline

import (
	"context"
	"testing"
	"time"
)

func TestBudget(t *testing.T) {
	if got := Budget(context.Background(), 7*time.Second); got != 7*time.Second {
		t.Fatalf("without a deadline: %v, want the limit", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got := Budget(ctx, time.Minute); got < 28*time.Second || got > 29*time.Second {
		t.Fatalf("30 s left: %v, want about 29 s (a second for the answer)", got)
	}
	ctx2, cancel2 := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel2()
	if got := Budget(ctx2, time.Minute); got < 1900*time.Millisecond || got > 2*time.Second {
		t.Fatalf("3 s left: %v, want about 2 s (a third for the answer)", got)
	}
	ctx3, cancel3 := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancel3()
	if got := Budget(ctx3, time.Minute); got != 0 {
		t.Fatalf("past the deadline: %v, want 0", got)
	}
}
