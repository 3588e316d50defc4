package relay

import (
	"errors"
	"fmt"
	"net/netip"
	"time"

	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// pairState is where a connection is in its life.
type pairState int

const (
	dialing  pairState = iota // a dial to the endpoint is in flight
	retrying                  // waiting before the next dial
	relaying                  // both sides connected
	finished
)

// pair is one accepted connection and its connection to an endpoint.
// Everything in it is owned by the loop's thread.
type pair struct {
	ln       *Listener
	state    pairState
	client   netip.AddrPort
	endpoint netip.AddrPort
	attempt  int
	// timer is the pair's one pending timer, replaced as its state moves:
	// the dial's timeout, the pause before the next dial, the keepalive
	// delay; cancelled when the pair finishes.
	timer *timer

	cs, es   side      // the client's and the endpoint's socket
	up, down direction // client to endpoint, endpoint to client
}

// side is one socket of a pair.
type side struct {
	pair   *pair
	fd     int
	id     uint64 // 0: not in the epoll set
	events uint32 // the events asked for while in the set
}

func (s *side) handle(l *Loop, events uint32) { s.pair.handle(l, s, events) }

// startPair takes an accepted connection and dials its first endpoint.
func startPair(l *Loop, ln *Listener, fd int, client netip.AddrPort) {
	if max := l.cfg.MaxPerClient; l.clients[client.Addr()] >= max {
		l.cfg.Refusals.Refuse("relay_connections_per_client", max, client.Addr().String(), "service", ln.addr.String())
		closeFD(fd, true)
		return
	}
	l.clients[client.Addr()]++
	p := &pair{ln: ln, client: client}
	p.cs = side{pair: p, fd: fd}
	p.es = side{pair: p, fd: -1}
	p.up = direction{src: &p.cs, dst: &p.es}
	p.down = direction{src: &p.es, dst: &p.cs}
	l.pairs[p] = struct{}{}
	ln.active.Add(1)
	p.dial(l, false)
}

// dial asks for an endpoint and starts a connection to it.
func (p *pair) dial(l *Loop, reset bool) {
	ep, err := p.ln.svc.Pick(p.client, reset)
	if err != nil {
		p.ln.svc.Record(servicelb.EventNoEndpoints, p.client, netip.AddrPort{}, err)
		p.finish(l, false)
		return
	}
	p.endpoint, p.state = ep, dialing
	family, sa := sockaddr(ep)
	fd, err := streamSocket(family)
	if err == nil {
		p.es.fd = fd
		err = noDelay(fd)
	}
	if err == nil {
		err = connect(fd, sa)
	}
	if err == nil {
		p.connected(l)
		return
	}
	if errors.Is(err, unix.EINPROGRESS) {
		p.es.id, err = l.register(fd, unix.EPOLLOUT, &p.es)
		p.es.events = unix.EPOLLOUT
	}
	if err != nil {
		p.dialFailed(l, fmt.Errorf("dial %s: %w", ep, err))
		return
	}
	timeout := l.cfg.DialTimeouts[p.attempt]
	p.schedule(l, timeout, func() {
		if p.state == dialing {
			p.dialFailed(l, fmt.Errorf("dial %s: %w after %s", ep, unix.ETIMEDOUT, timeout))
		}
	})
}

// connect starts a non-blocking connect and asks once more at once: to an
// endpoint behind a local bridge the whole handshake usually runs inside
// the first call, and the second then reports the result (nil: connected),
// which saves waiting for the socket's writability. EINPROGRESS means the
// dial is still in flight.
func connect(fd int, sa unix.Sockaddr) error {
	err := unix.Connect(fd, sa)
	if !errors.Is(err, unix.EINPROGRESS) {
		return err
	}
	err = unix.Connect(fd, sa)
	if errors.Is(err, unix.EALREADY) {
		return unix.EINPROGRESS
	}
	return err
}

// schedule makes fire the pair's pending timer, due after d, in place of
// the one before.
func (p *pair) schedule(l *Loop, d time.Duration, fire func()) {
	l.cancel(p.timer)
	p.timer = l.after(d, fire)
}

// dialFailed ends the dial in flight and schedules the next attempt, or
// gives up on the client.
func (p *pair) dialFailed(l *Loop, err error) {
	p.ln.svc.Record(servicelb.EventDialFailed, p.client, p.endpoint, err)
	p.es.close(l, false)
	p.attempt++
	if p.attempt >= len(l.cfg.DialTimeouts) || errors.Is(err, unix.EMFILE) || errors.Is(err, unix.ENFILE) {
		l.log.Debug("no endpoint for connection", "client", p.client.String(), "error", err)
		p.finish(l, false)
		return
	}
	p.state = retrying
	p.schedule(l, RetryPause(p.attempt), func() {
		if p.state == retrying {
			p.dial(l, true)
		}
	})
}

// connected starts relaying once the dial succeeded.
func (p *pair) connected(l *Loop) {
	p.state = relaying
	p.ln.svc.Record(servicelb.EventEndpointChosen, p.client, p.endpoint, nil)
	p.schedule(l, keepAliveDelay, func() {
		if p.state == relaying {
			if err := keepAlive(p.es.fd); err != nil {
				l.log.Warn("relay: endpoint keepalive", "client", p.client.String(), "endpoint", p.endpoint.String(), "error", err)
			}
		}
	})
	p.update(l)
}

// handle is an event on one of the pair's sockets.
func (p *pair) handle(l *Loop, s *side, events uint32) {
	switch p.state {
	case dialing:
		if s == &p.es {
			p.dialEvent(l, events)
		}
	case relaying:
		p.relayEvent(l, s, events)
	}
}

// dialEvent is the end of a dial in flight: connected or failed.
func (p *pair) dialEvent(l *Loop, events uint32) {
	soErr, err := unix.GetsockoptInt(p.es.fd, unix.SOL_SOCKET, unix.SO_ERROR)
	switch {
	case err != nil:
		p.dialFailed(l, fmt.Errorf("dial %s: %w", p.endpoint, err))
	case soErr != 0:
		p.dialFailed(l, fmt.Errorf("dial %s: %w", p.endpoint, unix.Errno(soErr)))
	case events&unix.EPOLLOUT == 0:
		p.dialFailed(l, fmt.Errorf("dial %s: connection ended", p.endpoint))
	default:
		p.connected(l)
	}
}

// finish ends the pair: both sockets closed (with a reset when reset is
// set), its pipes given back or dropped.
func (p *pair) finish(l *Loop, reset bool) {
	if p.state == finished {
		return
	}
	p.state = finished
	l.cancel(p.timer)
	p.timer = nil
	p.cs.close(l, reset)
	p.es.close(l, reset)
	p.up.release(l)
	p.down.release(l)
	delete(l.pairs, p)
	if n := l.clients[p.client.Addr()] - 1; n > 0 {
		l.clients[p.client.Addr()] = n
	} else {
		delete(l.clients, p.client.Addr())
	}
	p.ln.active.Add(-1)
}

// abort ends the pair with a reset on both sides.
func (p *pair) abort(l *Loop) { p.finish(l, true) }

// passReset ends the pair after a reset from the peer of from: the other
// side gets a reset, from (already reset) is only closed.
func (p *pair) passReset(l *Loop, from *side) {
	from.close(l, false)
	p.finish(l, true)
}

// close closes the side's socket (closing takes it out of the epoll set).
func (s *side) close(l *Loop, reset bool) {
	if s.fd < 0 {
		return
	}
	if s.id != 0 {
		l.forget(s.fd, s.id, false)
		s.id, s.events = 0, 0
	}
	closeFD(s.fd, reset)
	s.fd = -1
}
