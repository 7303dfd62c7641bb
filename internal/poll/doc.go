// Package poll waits in tests for a condition to hold: it calls the
// condition at a fixed interval until it returns nil, and gives up at a
// deadline (or when a context ends) with the condition's last error. Tests
// use it instead of sleeping for a guessed duration (STYLE.md habit 10),
// and instead of their own copies of the loop.
//
//	poll.Until(t, 10*time.Second, "the site settles", c.Settled)
//	poll.Every(100*time.Millisecond).UntilContext(ctx, t, "writes go direct", cond)
//
// The condition runs on the caller's goroutine, first right away and then
// after every interval, so it may call t.Fatal.
package poll
