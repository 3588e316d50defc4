package reaper

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
)

// DefaultInterval is how often a forwarder sweeps: a dead pod's links go
// two or three sweeps after the pod.
const DefaultInterval = 2 * time.Second

// sweepsToReap is how many sweeps in a row must find a namespace orphaned
// before its connection is closed: one listing of /proc can miss a process
// that moved to a new PID (a fork whose parent then exits).
const sweepsToReap = 2

// Reaper closes the connections whose client's or endpoint's namespace is
// orphaned. Its zero value is not usable; see New.
type Reaper struct {
	live func() (map[uint64]bool, error)
	// close runs a sweep's Close of a connection through begin; it does
	// nothing once ctx is done.
	close func(ctx context.Context, f begin.EventFactory) <-chan error
	mu    sync.Mutex
	conns map[string]*watched
}

// watched is one run of a connection: the inodes of its namespaces on this
// node, which of them a sweep has found alive, how many sweeps in a row
// have found one of those orphaned, and the Close a sweep has started for
// it, not yet run.
type watched struct {
	factory begin.EventFactory
	ends    []uint64
	seen    map[uint64]bool
	misses  int
	pending context.CancelFunc
}

// spare ends the Close a sweep started for w, if it has not run yet.
func (w *watched) spare() {
	if w.pending != nil {
		w.pending()
		w.pending = nil
	}
}

// New returns a Reaper that finds the live namespaces in /proc.
func New() *Reaper { return newReaper(LiveNetNS) }

func newReaper(live func() (map[uint64]bool, error)) *Reaper {
	return &Reaper{live: live, close: closeThroughBegin, conns: make(map[string]*watched)}
}

func closeThroughBegin(ctx context.Context, f begin.EventFactory) <-chan error {
	return f.Close(begin.CancelContext(ctx))
}

// Run sweeps every interval until ctx ends. It returns once the Closes it
// started have ended.
func (r *Reaper) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.Sweep(ctx)
	}
}

// Sweep looks at the namespaces of every connection once, closes the
// connections found orphaned, and returns when those Closes have ended. A
// Close that has not started when ctx ends is not run.
func (r *Reaper) Sweep(ctx context.Context) { r.closeAll(r.sweep(ctx)) }

// due is a connection a sweep found orphaned. Its Close runs only while
// ctx is not done: ctx ends when the run the sweep judged is requested
// again or closed before the Close runs (begin runs a connection's events
// one at a time, in order), or when the sweep's ctx ends.
type due struct {
	id      string
	netns   uint64
	run     *watched
	factory begin.EventFactory
	ctx     context.Context
}

// sweep lists the live namespaces and returns the connections to close.
func (r *Reaper) sweep(ctx context.Context) []due {
	r.mu.Lock()
	idle := len(r.conns) == 0
	r.mu.Unlock()
	if idle {
		return nil
	}
	live, err := r.live()
	if err != nil {
		slog.Warn("list the network namespaces that pods keep alive", "error", err)
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []due
	for id, w := range r.conns {
		gone := w.orphan(live)
		if gone == 0 {
			w.misses = 0
			continue
		}
		if w.misses++; w.misses >= sweepsToReap && w.pending == nil {
			d := due{id: id, netns: gone, run: w, factory: w.factory}
			d.ctx, w.pending = context.WithCancel(ctx)
			out = append(out, d)
		}
	}
	return out
}

// orphan returns an end that was seen alive and is not now (0: none), and
// marks the ends alive now as seen.
func (w *watched) orphan(live map[uint64]bool) uint64 {
	var gone uint64
	for _, ino := range w.ends {
		switch {
		case live[ino]:
			w.seen[ino] = true
		case w.seen[ino]:
			gone = ino
		}
	}
	return gone
}

// closeAll closes the connections through begin, all at once, and waits
// for them.
func (r *Reaper) closeAll(dues []due) {
	if len(dues) == 0 {
		return
	}
	done := make([]<-chan error, len(dues))
	for i, d := range dues {
		slog.Info("closing a connection whose pod is gone", "conn", d.id, "netns", d.netns)
		done[i] = r.close(d.ctx, d.factory)
	}
	for i, ch := range done {
		if err := <-ch; err != nil {
			slog.Warn("close of a connection whose pod is gone", "conn", dues[i].id, "error", err)
		}
	}
	r.mu.Lock()
	for _, d := range dues {
		d.run.spare()
	}
	r.mu.Unlock()
}

// track records connection id, established or refreshed with factory f,
// with the inodes of its namespaces on this node. A refresh with the same
// ends keeps what the sweeps have found. Either way, a Close a sweep
// started for the connection and that has not run yet will not: the
// connection's Request has succeeded since the sweep judged it (a
// reselect or a move to another endpoint keeps begin's factory, so the
// factory does not tell the runs apart).
func (r *Reaper) track(id string, f begin.EventFactory, ends []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.conns[id]; ok {
		if w.pending != nil {
			slog.Info("connection requested again before the Close of its pod ran: spared", "conn", id)
		}
		w.spare()
		if slices.Equal(w.ends, ends) {
			w.factory = f
			return
		}
	}
	r.conns[id] = &watched{factory: f, ends: ends, seen: make(map[uint64]bool)}
}

// closed is told that connection id is being closed with factory f: a
// Close of the current run ends its watch, and a Close a sweep started
// for it and that has not run yet will not.
func (r *Reaper) closed(id string, f begin.EventFactory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.conns[id]; ok && f != nil && w.factory == f {
		w.spare()
		delete(r.conns, id)
	}
}
