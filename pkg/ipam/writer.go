package ipam

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// writer is the single, ordered path of changes to the store. Changes are
// queued (never blocking on I/O) with a sequence number; one goroutine commits
// everything queued so far in one transaction (group commit), so concurrent
// callers share a commit. Ops are committed in queue order, so what is
// durable is always a prefix of the queue. A failed commit is retried with
// backoff, keeping the order; its waiters are told at once.
type writer struct {
	store    store.Store
	maxBatch int
	log      *slog.Logger
	observe  func(batch int, d time.Duration, err error)
	onHealth func(ok bool) // called on every change of commit success

	mu        sync.Mutex
	queue     []queuedOp
	seq       uint64        // last sequence number handed out
	changed   chan struct{} // closed and replaced after every commit attempt
	failures  uint64        // failed commit attempts
	failedTo  uint64        // last seq of the last failed attempt
	lastErr   error
	stopped   bool
	committed atomic.Uint64 // every op with seq <= committed is durable

	kick chan struct{}
	stop chan struct{}
	done chan struct{}
}

type queuedOp struct {
	op  store.Op
	seq uint64
}

func newWriter(s store.Store, maxBatch int, log *slog.Logger, observe func(int, time.Duration, error), onHealth func(bool)) *writer {
	if maxBatch <= 0 {
		maxBatch = 4096
	}
	if observe == nil {
		observe = func(int, time.Duration, error) {}
	}
	if onHealth == nil {
		onHealth = func(bool) {}
	}
	w := &writer{
		store: s, maxBatch: maxBatch, log: log, observe: observe, onHealth: onHealth,
		changed: make(chan struct{}),
		kick:    make(chan struct{}, 1),
		stop:    make(chan struct{}),
		done:    make(chan struct{}),
	}
	go w.run()
	return w
}

// enqueue queues ops in order and returns the sequence number of the last.
// It never blocks on I/O; callers may hold engine locks.
func (w *writer) enqueue(ops ...store.Op) uint64 {
	w.mu.Lock()
	for _, op := range ops {
		w.seq++
		w.queue = append(w.queue, queuedOp{op, w.seq})
	}
	seq := w.seq
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return seq
}

// durable reports whether seq is committed.
func (w *writer) durable(seq uint64) bool {
	return w.committed.Load() >= seq
}

// wait returns when seq is durable, or with ErrUnavailable when a commit
// attempt that included seq failed after wait was called, or when the writer
// stopped before committing it, or with the context's error.
func (w *writer) wait(ctx context.Context, seq uint64) error {
	if w.durable(seq) {
		return nil
	}
	w.mu.Lock()
	failures := w.failures
	w.mu.Unlock()
	for {
		w.mu.Lock()
		ch := w.changed
		failed := w.failures != failures && w.failedTo >= seq
		lastErr, stopped := w.lastErr, w.stopped
		w.mu.Unlock()
		switch {
		case w.durable(seq):
			return nil
		case failed:
			return fmt.Errorf("%w: %v", ErrUnavailable, lastErr)
		case stopped:
			return fmt.Errorf("%w: shutting down", ErrUnavailable)
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (w *writer) run() {
	defer close(w.done)
	var batch []store.Op
	// After a failed commit the writer retries on its own, after a pause
	// that grows while commits keep failing; otherwise it waits for work.
	retry := backoff.New(50*time.Millisecond, 5*time.Second)
	var pause time.Duration
	healthy := true
	for {
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-w.stop:
				t.Stop()
			}
		} else {
			select {
			case <-w.kick:
			case <-w.stop:
			}
		}
		stopping := isClosed(w.stop)
		for {
			w.mu.Lock()
			n := min(len(w.queue), w.maxBatch)
			if n == 0 {
				w.mu.Unlock()
				break
			}
			batch = batch[:0]
			for _, q := range w.queue[:n] {
				batch = append(batch, q.op)
			}
			last := w.queue[n-1].seq
			w.mu.Unlock()

			start := time.Now()
			err := w.store.Apply(context.Background(), batch)
			w.observe(n, time.Since(start), err)

			w.mu.Lock()
			if err == nil {
				w.queue = append(w.queue[:0], w.queue[n:]...)
				w.committed.Store(last)
			} else {
				w.failures++
				w.failedTo = last
				w.lastErr = err
			}
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			if healthy != (err == nil) {
				healthy = err == nil
				w.onHealth(healthy)
			}
			if err != nil {
				w.log.Error("store commit failed; retrying", "ops", n, "error", err)
				pause = retry.Next()
				break
			}
			pause = 0
			retry.Reset()
		}
		if stopping {
			w.mu.Lock()
			w.stopped = true
			if len(w.queue) > 0 {
				w.log.Error("store writer stopped with uncommitted changes", "ops", len(w.queue))
			}
			close(w.changed)
			w.changed = make(chan struct{})
			w.mu.Unlock()
			return
		}
	}
}

// close commits what is queued (one attempt) and stops the writer.
func (w *writer) close() {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	<-w.done
}

func isClosed(ch chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// last returns the sequence number of the last queued op.
func (w *writer) last() uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.seq
}
