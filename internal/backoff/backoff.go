// Package backoff is the project's one capped exponential backoff: every
// loop that retries something that failed (a watch, a registration, a
// write) waits through it, so that the policy and its wording in the logs
// are the same everywhere.
package backoff

import (
	"context"
	"time"
)

// Backoff yields waits that double from Initial up to Max. The zero value
// is not usable; make one with New. It is not safe for concurrent use: it
// belongs to the loop that retries.
type Backoff struct {
	initial, limit time.Duration
	next           time.Duration
}

// New returns a backoff starting at initial and capped at limit (a limit
// below initial is raised to initial).
func New(initial, limit time.Duration) *Backoff {
	if initial <= 0 {
		initial = time.Millisecond
	}
	return &Backoff{initial: initial, limit: max(limit, initial), next: initial}
}

// Next returns the wait before the next try and doubles the one after it.
func (b *Backoff) Next() time.Duration {
	d := b.next
	b.next = min(2*b.next, b.limit)
	return d
}

// Reset starts again from the initial wait, after a success.
func (b *Backoff) Reset() { b.next = b.initial }

// Wait sleeps for Next() or until ctx is done; it reports whether the full
// wait passed.
func (b *Backoff) Wait(ctx context.Context) bool { return Sleep(ctx, b.Next()) }

// Sleep sleeps for d or until ctx is done; it reports whether d passed.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
