package poll

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// recorder is a testing.TB that records Fatalf instead of stopping.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntil(t *testing.T) {
	for _, tc := range []struct {
		name     string
		poller   Poller
		okAfter  int // calls until cond holds; 0 never
		timeout  time.Duration
		wantFail string
	}{
		{"at once", Every(time.Hour), 1, time.Second, ""},
		{"after a few", Every(time.Millisecond), 5, 10 * time.Second, ""},
		{"yielding", Every(0), 100, 10 * time.Second, ""},
		{"never", Every(time.Millisecond), 0, 20 * time.Millisecond, "waiting for the thing: timed out after 20ms: not yet (call "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			r := &recorder{TB: t}
			tc.poller.Until(r, tc.timeout, "the thing", func() error {
				calls++
				if calls == tc.okAfter {
					return nil
				}
				return fmt.Errorf("not yet (call %d)", calls)
			})
			if !strings.HasPrefix(r.failed, tc.wantFail) || (tc.wantFail == "") != (r.failed == "") {
				t.Fatalf("failure %q, want %q", r.failed, tc.wantFail)
			}
			if tc.okAfter > 0 && calls != tc.okAfter {
				t.Fatalf("%d calls, want %d", calls, tc.okAfter)
			}
		})
	}
}

func TestUntilContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	r := &recorder{TB: t}
	Every(time.Millisecond).UntilContext(ctx, r, "the thing", func() error {
		if calls++; calls == 3 {
			cancel()
		}
		return errors.New("not yet")
	})
	if want := "waiting for the thing: context canceled: not yet"; r.failed != want {
		t.Fatalf("failure %q, want %q", r.failed, want)
	}
	if calls != 3 {
		t.Fatalf("%d calls after the context ended, want 3", calls)
	}
	ok := 0
	UntilContext(context.Background(), t, "ok", True(func() bool { ok++; return ok == 2 }))
	if ok != 2 {
		t.Fatalf("%d calls, want 2", ok)
	}
}

func TestWait(t *testing.T) {
	err := Wait(time.Millisecond, True(func() bool { return false }))
	if !errors.Is(err, errFalse) {
		t.Fatalf("Wait = %v, want the condition's error", err)
	}
	if err := Wait(time.Millisecond, func() error { return nil }); err != nil {
		t.Fatal(err)
	}
}
