package nexthopcheck

import (
	"bytes"
	"math/rand/v2"
	"time"
)

// probe is the probing of one peer: its outstanding echo request, its
// verdict and its counters.
type probe struct {
	peer Peer
	h    health

	seq      uint16
	pending  bool // a request was sent and is not judged yet
	answered bool // the pending request got its reply
	// heard: an answer to an earlier request came since the last
	// judgement (late, but the peer is alive).
	heard  bool
	sentAt time.Time

	sent, replies, lost, late uint64
	rtt                       time.Duration
	err                       string // the last send error
}

func newProbe(p Peer, now time.Time) *probe {
	return &probe{peer: p, h: newHealth(now), seq: uint16(rand.Uint32())}
}

// round is one tick: read the answers, judge the probes of the previous
// tick, send the next ones. It returns the changes of state.
func (c *Checker) round(now time.Time) []Change {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.collectLocked(now)
	var changes []Change
	for _, p := range c.peers {
		s := c.socks[keyOf(p.peer)]
		if s == nil {
			continue // Unchecked
		}
		if c.judge(p, now) {
			changes = append(changes, Change{Peer: p.peer, State: p.h.state, At: now})
		}
		c.send(s, p, now)
	}
	return changes
}

// collectLocked marks the pending probes answered from what the sockets
// hold.
func (c *Checker) collectLocked(now time.Time) {
	for k, s := range c.socks {
		err := s.drain(func(r reply) {
			p := c.peers[Peer{Addr: r.from, LinkIndex: k.link}]
			if p == nil || !bytes.Equal(r.payload, c.token) {
				return
			}
			p.hear(r, now)
		})
		if err == nil {
			err = s.readDrops()
		}
		if err != nil {
			c.o.log.Warn("nexthop check: read", "link", k.link, "error", err)
		}
		if n, ok := s.dropsToLog(); ok {
			c.o.log.Warn("nexthop check: answers dropped, the receive buffer was full", "link", k.link, "dropped", n, "buffer", s.rcvbuf)
		}
	}
}

// hear records an answer: the pending request's, or a late one.
func (p *probe) hear(r reply, now time.Time) {
	switch {
	case p.pending && r.seq == p.seq && !p.answered:
		p.answered = true
		at := r.at
		if at.IsZero() {
			at = now
		}
		p.rtt = at.Sub(p.sentAt)
	case r.seq != p.seq:
		p.late++
		p.heard = true
	}
}

// judge records the outcome of p's pending probe; it reports a change of
// state, which it logs. A probe without its answer is lost, but the
// interval counts as answered when a late answer came in it: the peer is
// alive, and slow answers (a loaded machine, a queue) are no reason to
// take it out of a route.
func (c *Checker) judge(p *probe, now time.Time) bool {
	if !p.pending {
		return false
	}
	alive := p.answered || p.heard
	p.pending, p.heard = false, false
	if p.answered {
		p.replies++
	} else {
		p.lost++
	}
	var changed bool
	if alive {
		changed = p.h.answered(now, c.s)
	} else {
		changed = p.h.lost(now, c.s)
	}
	if changed {
		c.logChange(p)
	}
	return changed
}

// logChange is the one line of a change of state.
func (c *Checker) logChange(p *probe) {
	attrs := []any{"peer", p.peer.Addr, "link", p.peer.LinkIndex,
		"sent", p.sent, "lost", p.lost, "downs", p.h.downs}
	if p.h.state == Down {
		attrs = append(attrs, "lostInARow", p.h.fails, "nextHoldDown", p.h.holdDown(c.s))
		if p.err != "" {
			attrs = append(attrs, "error", p.err)
		}
		if p.replies == 0 {
			attrs = append(attrs, "hint", "it never answered: does it answer ICMP echo?")
		}
		c.o.log.Warn("nexthop check: peer down", attrs...)
		return
	}
	c.o.log.Info("nexthop check: peer up", append(attrs, "answeredInARow", p.h.passes)...)
}

// send sends p's next probe; a failed send is a probe that will be lost.
func (c *Checker) send(s *echoSocket, p *probe, now time.Time) {
	p.seq++
	p.pending, p.answered, p.sentAt = true, false, now
	p.sent++
	err := s.send(p.peer.Addr, p.seq, c.token, c.pkt)
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	if msg != p.err {
		c.o.log.Debug("nexthop check: send", "peer", p.peer.Addr, "link", p.peer.LinkIndex, "error", msg)
		p.err = msg
	}
}
