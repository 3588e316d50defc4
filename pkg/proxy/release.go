package proxy

import (
	"context"
	"log/slog"
	"time"

	"github.com/causeway-net/causeway/internal/backoff"
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

// removeLeftoverLink deletes the kernel link that the closed connection id
// last had, if it is still there (see Config.Links), retrying a failure:
// its addresses are released only once no link of theirs is left. It
// reports false if ctx ended first.
func (p *Proxy) removeLeftoverLink(ctx context.Context, id string, log *slog.Logger) bool {
	if p.cfg.Links == nil {
		return true
	}
	for {
		index, name, removed, err := p.tryRemoveLeftoverLink(ctx, id)
		switch {
		case ctx.Err() != nil:
			log.Info("address release stopped", "reason", ctx.Err())
			return false
		case err == nil:
			if removed {
				log.Info("leftover link of a closed connection removed", "index", index, "name", name)
			}
			return true
		}
		log.Warn("leftover link of a closed connection not removed, retrying", "index", index, "name", name, "error", err)
		if !backoff.Sleep(ctx, p.cfg.RetryInterval) {
			log.Info("address release stopped", "reason", ctx.Err())
			return false
		}
	}
}

// tryRemoveLeftoverLink deletes the link id last had if id has no link now
// and its release still runs. It holds p.mu throughout: a re-request
// cancels the release (cancelRelease) and a link announced again is
// recorded (InterfaceCreated) under p.mu, so neither can come between the
// check and the delete.
func (p *Proxy) tryRemoveLeftoverLink(ctx context.Context, id string) (index int, name string, removed bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	st := p.conns[id]
	if ctx.Err() != nil || st == nil || st.link != 0 || st.lastLink == 0 {
		return 0, "", false, nil
	}
	index, name = st.lastLink, st.lastName
	removed, err = p.cfg.Links.RemoveLink(index, name)
	return index, name, removed, err
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
