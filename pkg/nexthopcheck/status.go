package nexthopcheck

import (
	"slices"
)

// Statuses returns the status of every peer, ordered by address and link.
func (c *Checker) Statuses() []Status {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]Status, 0, len(c.peers))
	for _, p := range c.peers {
		out = append(out, c.statusLocked(p))
	}
	slices.SortFunc(out, func(a, b Status) int {
		if d := a.Peer.Addr.Compare(b.Peer.Addr); d != 0 {
			return d
		}
		return a.Peer.LinkIndex - b.Peer.LinkIndex
	})
	return out
}

// Status returns the status of peer p, if it is watched.
func (c *Checker) Status(p Peer) (Status, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	pr := c.peers[p.normal()]
	if pr == nil {
		return Status{}, false
	}
	return c.statusLocked(pr), true
}

func (c *Checker) statusLocked(p *probe) Status {
	st := Status{
		Peer: p.peer, Addr: p.peer.Addr.String(), Link: p.peer.LinkIndex,
		State: p.h.state, Since: p.h.since,
		Sent: p.sent, Answered: p.replies, Lost: p.lost, Late: p.late, Downs: p.h.downs,
		RTT: p.rtt, HoldDown: p.h.holdDown(c.s), Error: p.err,
	}
	if c.s.Off || c.socks[keyOf(p.peer)] == nil {
		st.State = Unchecked
	}
	return st
}

// Dropped is the number of answers the open probe sockets dropped because
// their receive buffer was full (each one a probe judged lost): a local
// cause of losses, which explains a flap that the peer did not cause.
func (c *Checker) Dropped() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	var n uint64
	for _, s := range c.socks {
		n += uint64(s.drops)
	}
	return n
}
