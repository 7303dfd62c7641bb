package poll

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// DefaultInterval is how often Until, UntilContext and Wait call the
// condition.
const DefaultInterval = 10 * time.Millisecond

// Poller calls a condition at a fixed interval.
type Poller struct {
	interval time.Duration
}

// Every returns a Poller that calls its condition every d. With d = 0 it
// yields the processor between calls instead of sleeping (for conditions
// that other goroutines satisfy within microseconds).
func Every(d time.Duration) Poller {
	return Poller{interval: d}
}

// Until calls cond every DefaultInterval until it returns nil. When it
// still fails after timeout, Until fails tb with what it waited for and
// cond's last error.
func Until(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	Every(DefaultInterval).Until(tb, timeout, what, cond)
}

// UntilContext is Until bounded by ctx instead of a timeout.
func UntilContext(ctx context.Context, tb testing.TB, what string, cond func() error) {
	tb.Helper()
	Every(DefaultInterval).UntilContext(ctx, tb, what, cond)
}

// Wait calls cond every DefaultInterval until it returns nil, and returns
// cond's last error, wrapped, when it still fails after timeout.
func Wait(timeout time.Duration, cond func() error) error {
	return Every(DefaultInterval).Wait(timeout, cond)
}

// True adapts a condition that only says yes or no.
func True(cond func() bool) func() error {
	return func() error {
		if cond() {
			return nil
		}
		return errFalse
	}
}

var errFalse = errors.New("the condition is false")

// Until calls cond until it returns nil; see the function Until.
func (p Poller) Until(tb testing.TB, timeout time.Duration, what string, cond func() error) {
	tb.Helper()
	if err := p.Wait(timeout, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// UntilContext calls cond until it returns nil; when ctx ends first it
// fails tb with what it waited for and cond's last error.
func (p Poller) UntilContext(ctx context.Context, tb testing.TB, what string, cond func() error) {
	tb.Helper()
	if err := p.WaitContext(ctx, cond); err != nil {
		tb.Fatalf("waiting for %s: %v", what, err)
	}
}

// Wait calls cond until it returns nil, or returns its last error when it
// still fails after timeout.
func (p Poller) Wait(timeout time.Duration, cond func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %v: %w", timeout, err)
		}
		p.pause(nil)
	}
}

// WaitContext calls cond until it returns nil, or returns its last error
// when ctx ends first.
func (p Poller) WaitContext(ctx context.Context, cond func() error) error {
	for {
		err := cond()
		if err == nil {
			return nil
		}
		if !p.pause(ctx.Done()) {
			return fmt.Errorf("%w: %w", ctx.Err(), err)
		}
	}
}

// pause waits one interval; it returns false if done closed first.
func (p Poller) pause(done <-chan struct{}) bool {
	if p.interval <= 0 {
		runtime.Gosched()
		select {
		case <-done:
			return false
		default:
			return true
		}
	}
	t := time.NewTimer(p.interval)
	defer t.Stop()
	select {
	case <-done:
		return false
	case <-t.C:
		return true
	}
}
