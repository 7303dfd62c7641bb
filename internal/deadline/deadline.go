// Package deadline bounds a server-side wait so that it ends before the
// request's own deadline: the caller then learns why the wait failed
// instead of seeing only its deadline expire.
package deadline

import (
	"context"
	"time"
)

// Budget returns how long a wait of at most limit may last under ctx: it
// leaves a third of the time remaining before ctx's deadline, at most a
// second, for the answer to reach the caller. It is never negative.
func Budget(ctx context.Context, limit time.Duration) time.Duration {
	if d, ok := ctx.Deadline(); ok {
		rem := time.Until(d)
		limit = min(limit, rem-min(rem/3, time.Second))
	}
	return max(limit, 0)
}
