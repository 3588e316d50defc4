package expiry

import (
	"context"
	"sync"
	"time"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"

	"github.com/causeway-net/causeway/internal/clock"
)

// wait is one armed wait for a connection's expiry: a timer, and a context
// that a close queued by the timer is cancelled with.
type wait struct {
	// done is cancelled with the wait: a close that the timer queued on
	// the connection's begin is then dropped instead of run (a refresh or
	// a Close came first), and so is every wait when the chain ends.
	done       context.Context
	cancelDone context.CancelFunc

	mu      sync.Mutex // the timer may fire before arm has stored it
	timer   clock.Timer
	release func() bool // unregisters the timer's stop from done
}

// arm starts a wait that, after d, closes the connection through events
// (the connection's begin), unless it is cancelled first or the chain's
// context ends, which also stops its timer.
func (s *server) arm(events begin.EventFactory, d time.Duration) *wait {
	w := &wait{}
	w.done, w.cancelDone = context.WithCancel(s.chainCtx)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = s.clock.AfterFunc(d, func() { w.expire(events) })
	w.release = context.AfterFunc(w.done, w.stopTimer)
	return w
}

// expire runs in the timer's goroutine: it closes the connection through
// the chain and waits for the close (the goroutine ends with it).
func (w *wait) expire(events begin.EventFactory) {
	<-events.Close(begin.CancelContext(w.done))
	w.cancel()
}

func (w *wait) stopTimer() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer.Stop()
}

// cancel stops the timer and drops a close it queued; it may be called more
// than once.
func (w *wait) cancel() {
	w.mu.Lock()
	w.timer.Stop()
	release := w.release
	w.mu.Unlock()
	release()
	w.cancelDone()
}
