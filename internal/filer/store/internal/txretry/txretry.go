// Package txretry paces the retries of optimistic transactions in the
// server backends (postgres, redis): exponential backoff with full jitter,
// so that transactions that conflicted once do not collide again in step.
// Nothing outside internal/filer/store imports it.
package txretry

import (
	"context"
	"math/rand/v2"
	"time"
)

// DefaultMax is the number of retries after which a transaction gives up
// with store.ErrConflict. It is generous: a conflict costs one round of a
// few milliseconds, and giving up turns into a failed filer operation.
const DefaultMax = 100

const (
	base    = 500 * time.Microsecond
	ceiling = 50 * time.Millisecond
)

// Wait sleeps before retry number attempt (0 for the first retry), or
// returns ctx.Err() if ctx ends first.
func Wait(ctx context.Context, attempt int) error {
	d := ceiling
	if attempt < 7 {
		d = min(base<<attempt, ceiling)
	}
	t := time.NewTimer(rand.N(d) + time.Microsecond)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
