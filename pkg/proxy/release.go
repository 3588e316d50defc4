package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
	"github.com/causeway-net/causeway/pkg/dataplane"
)

// pendingRelease is a scheduled or running release of some children of one
// connection id.
type pendingRelease struct {
	children []childKey
	full     bool   // all children of the id (UnsetIPContext), not a rollback
	closedBy string // the NSM connection whose close scheduled a full release, if known
	delay    time.Duration
	cancel   context.CancelFunc
}

// scheduleReleaseLocked starts the release of children of st after delay;
// closedBy is the NSM connection whose close asked for it ("" for a
// rollback). p.mu must be held. It reports false if the proxy is closed.
func (p *Proxy) scheduleReleaseLocked(st *connState, children []childKey, full bool, closedBy string, delay time.Duration) bool {
	ctx, cancel := context.WithCancel(p.relCtx)
	pr := &pendingRelease{children: children, full: full, closedBy: closedBy, delay: delay, cancel: cancel}
	id := st.id
	if !p.goReleaseLocked(func() { p.runRelease(ctx, id, pr) }) {
		cancel()
		return false
	}
	st.release = pr
	return true
}

// Retain makes the connections that close from now on keep their
// addresses: no release is scheduled, their leases stay with the IPAM
// (whose garbage collection frees them if nothing renews them), and a
// proxy that opens the same connections again, this one restarted, gets
// the same addresses. The daemon calls it when it stops, before it closes
// its LB connections, so that a graceful restart cannot move an LB side's
// address to another LB. Releases already pending are not affected (Close
// forces them).
func (p *Proxy) Retain() {
	p.mu.Lock()
	already := p.retaining
	p.retaining = true
	p.mu.Unlock()
	if !already {
		p.log.Info("the addresses of connections closed from now on are kept")
	}
}

// removeLeftoverLink has the dataplane delete the kernel link that the
// closed connection id last had, if it is still there: its addresses are
// released only once no link of theirs is left. The link goes in the
// desired state (State.Remove), and the sync loop applies it under p.mu,
// so that neither a re-request (which cancels the release) nor a link
// announced again (InterfaceCreated) comes between its check and the
// delete; a failed Apply is retried by the sync loop. It reports false if
// ctx ended first.
func (p *Proxy) removeLeftoverLink(ctx context.Context, id string, log *slog.Logger) bool {
	p.mu.Lock()
	st := p.conns[id]
	if ctx.Err() != nil {
		p.mu.Unlock()
		log.Info("address release stopped", "reason", ctx.Err())
		return false
	}
	if st == nil || st.link != 0 || st.lastLink == 0 {
		p.mu.Unlock()
		return true
	}
	c := p.removals.closeLink(ctx, id, dataplane.LinkRef{Index: st.lastLink, Name: st.lastName})
	p.mu.Unlock()
	p.markDirty()
	select {
	case <-c.done:
		return true
	case <-ctx.Done():
		p.mu.Lock()
		p.removals.forget(id, c)
		p.mu.Unlock()
		log.Info("address release stopped", "reason", ctx.Err())
		return false
	}
}

// runRelease waits for the delay (cut short by Close), then releases the
// children one by one, retrying each until it succeeds or the release is
// cancelled (by a new request for the id, or by Close's deadline). It holds
// the id's lock while it calls the IPAM so that no request for the same id
// interleaves.
func (p *Proxy) runRelease(ctx context.Context, id string, pr *pendingRelease) {
	defer pr.cancel()
	log := p.log.With("id", id)
	if pr.delay > 0 {
		t := p.cfg.Clock.NewTimer(pr.delay)
		select {
		case <-t.C():
		case <-p.force:
			t.Stop()
			log.Info("forcing pending address release on close")
		case <-ctx.Done():
			t.Stop()
			return
		}
	}
	unlock, err := p.locks.lock(ctx, id)
	if err != nil {
		return
	}
	defer unlock()
	if ctx.Err() != nil {
		return // cancelled while the timer fired or while waiting for the lock
	}
	if pr.full && !p.removeLeftoverLink(ctx, id, log) {
		return
	}
	for _, k := range pr.children {
		for {
			actx, cancel := context.WithTimeout(ctx, p.cfg.IPAMTimeout)
			err := p.release(actx, k.Family, k.Name)
			cancel()
			if err == nil {
				break
			}
			if ctx.Err() != nil {
				log.Info("address release stopped", "reason", ctx.Err())
				return
			}
			log.Warn("address release failed, retrying", "error", err)
			if !backoff.Sleep(ctx, p.cfg.RetryInterval) {
				log.Info("address release stopped", "reason", ctx.Err())
				return
			}
		}
		p.mu.Lock()
		moved := false
		if st := p.conns[id]; st != nil {
			delete(st.allocs, k)
			moved = p.refreshHopsLocked(st)
			moved = p.refreshFilterLocked(st) || moved
		}
		p.mu.Unlock()
		if moved {
			p.markDirty()
		}
	}
	p.mu.Lock()
	if st := p.conns[id]; st != nil && st.release == pr {
		st.release = nil
		p.dropIdleLocked(st)
	}
	p.counters.releases++
	p.mu.Unlock()
	log.Info("addresses released", "children", childNames(pr.children), "rollback", !pr.full)
}
