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
	live    func() (map[uint64]bool, error)
	mu      sync.Mutex
	conns   map[string]*watched
	reaping map[begin.EventFactory]bool
}

// watched is one connection: the inodes of its namespaces on this node,
// which of them a sweep has found alive, and how many sweeps in a row have
// found one of those orphaned.
type watched struct {
	factory begin.EventFactory
	ends    []uint64
	seen    map[uint64]bool
	misses  int
}

// New returns a Reaper that finds the live namespaces in /proc.
func New() *Reaper { return newReaper(LiveNetNS) }

func newReaper(live func() (map[uint64]bool, error)) *Reaper {
	return &Reaper{live: live, conns: make(map[string]*watched), reaping: make(map[begin.EventFactory]bool)}
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
func (r *Reaper) Sweep(ctx context.Context) { r.closeAll(ctx, r.sweep()) }

// due is a connection a sweep found orphaned.
type due struct {
	id      string
	netns   uint64
	factory begin.EventFactory
}

// sweep lists the live namespaces and returns the connections to close.
func (r *Reaper) sweep() []due {
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
		if w.misses++; w.misses >= sweepsToReap {
			out = append(out, due{id: id, netns: gone, factory: w.factory})
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
func (r *Reaper) closeAll(ctx context.Context, dues []due) {
	if len(dues) == 0 {
		return
	}
	r.mu.Lock()
	for _, d := range dues {
		r.reaping[d.factory] = true
	}
	r.mu.Unlock()
	done := make([]<-chan error, len(dues))
	for i, d := range dues {
		slog.Info("closing a connection whose pod is gone", "conn", d.id, "netns", d.netns)
		done[i] = d.factory.Close(begin.CancelContext(ctx))
	}
	for i, ch := range done {
		if err := <-ch; err != nil {
			slog.Warn("close of a connection whose pod is gone", "conn", dues[i].id, "error", err)
		}
	}
	r.mu.Lock()
	for _, d := range dues {
		delete(r.reaping, d.factory)
	}
	r.mu.Unlock()
}

// track records connection id, established or refreshed with factory f,
// with the inodes of its namespaces on this node. A refresh with the same
// ends keeps what the sweeps have found.
func (r *Reaper) track(id string, f begin.EventFactory, ends []uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w, ok := r.conns[id]; ok && slices.Equal(w.ends, ends) {
		w.factory = f
		return
	}
	r.conns[id] = &watched{factory: f, ends: ends, seen: make(map[uint64]bool)}
}

// closing is told that connection id is being closed with factory f, and
// says whether the Close may go on. A Close that a sweep started is let
// through only while f is still the connection's current run: by the time
// it is run, the connection may have been closed, and even requested again
// under the same id, which that Close must not tear down. Every other
// Close goes on.
func (r *Reaper) closing(id string, f begin.EventFactory) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w, ok := r.conns[id]
	current := ok && f != nil && w.factory == f
	if current {
		delete(r.conns, id)
	}
	return current || !r.reaping[f]
}
