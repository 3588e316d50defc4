package relay

import (
	"errors"

	"golang.org/x/sys/unix"
)

// direction is one way of a pair: bytes spliced from src into a pipe and
// from the pipe into dst. While bytes wait in the pipe (dst is full), src
// is not read: the backpressure reaches the sender through TCP.
type direction struct {
	src, dst *side
	pipe     *pipe // only while bytes are in it
	pending  int   // bytes in the pipe
	eof      bool  // src sent its FIN
	done     bool  // dst was shut down for writing
	moved    int64 // bytes taken from src
}

// reading reports whether src is to be read.
func (d *direction) reading() bool { return !d.eof && d.pending == 0 }

const spliceFlags = unix.SPLICE_F_NONBLOCK | unix.SPLICE_F_MOVE

// pump moves what src has into the pipe and on to dst. It reports false
// when the pair failed (and was aborted).
func (d *direction) pump(l *Loop, p *pair) bool {
	if d.pipe == nil {
		pp, err := l.pipes.get()
		if err != nil {
			l.log.Warn("relay: no pipe for a connection", "client", p.client.String(), "error", err)
			p.abort(l)
			return false
		}
		d.pipe = pp
	}
	n, err := splice(d.src.fd, d.pipe.w, d.pipe.size)
	switch {
	case errors.Is(err, unix.EAGAIN):
		d.release(l)
		return true
	case errors.Is(err, unix.ECONNRESET):
		p.passReset(l, d.src)
		return false
	case err != nil:
		p.abort(l)
		return false
	case n == 0:
		d.eof = true
		d.release(l)
		return d.shutdownIfDrained(l, p)
	}
	d.pending = n
	d.moved += int64(n)
	return d.flush(l, p)
}

// flush moves the pipe's bytes into dst; what dst cannot take now waits
// for it to be writable.
func (d *direction) flush(l *Loop, p *pair) bool {
	n, err := splice(d.pipe.r, d.dst.fd, d.pending)
	switch {
	case errors.Is(err, unix.EAGAIN):
		return true
	case err != nil:
		p.abort(l)
		return false
	}
	d.pending -= n
	if d.pending > 0 {
		return true
	}
	d.release(l)
	return d.shutdownIfDrained(l, p)
}

// shutdownIfDrained passes src's FIN on once every byte before it went.
func (d *direction) shutdownIfDrained(l *Loop, p *pair) bool {
	if !d.eof || d.pending > 0 || d.done {
		return true
	}
	d.done = true
	if err := unix.Shutdown(d.dst.fd, unix.SHUT_WR); err != nil {
		p.abort(l)
		return false
	}
	return true
}

// release gives an empty pipe back to the pool; one with bytes left (the
// pair ended) is closed.
func (d *direction) release(l *Loop) {
	if d.pipe == nil {
		return
	}
	if d.pending == 0 {
		l.pipes.put(d.pipe)
	} else {
		d.pipe.close()
	}
	d.pipe, d.pending = nil, 0
}

// splice moves up to n bytes from fd in to fd out without blocking.
func splice(in, out, n int) (int, error) {
	for {
		m, err := unix.Splice(in, nil, out, nil, n, spliceFlags)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		return int(m), err
	}
}

// relayEvent is readiness of side s of a relaying pair.
func (p *pair) relayEvent(l *Loop, s *side, events uint32) {
	from, into := &p.up, &p.down
	if s == &p.es {
		from, into = &p.down, &p.up
	}
	if events&unix.EPOLLERR != 0 {
		// The peer reset (or the connection failed). What it sent before
		// still goes on, as far as the other side takes it now (a server
		// that answers and closes with a request unread resets), then the
		// other side gets the reset.
		for from.reading() {
			before := from.moved
			if !from.pump(l, p) {
				return
			}
			if from.moved == before {
				break
			}
		}
		p.passReset(l, s)
		return
	}
	ok := true
	if events&unix.EPOLLOUT != 0 && into.pending > 0 {
		ok = into.flush(l, p)
	}
	if ok && from.reading() && events&(unix.EPOLLIN|unix.EPOLLHUP) != 0 {
		ok = from.pump(l, p)
	}
	if ok {
		p.update(l)
	}
}

// update ends a pair whose two directions are done, or asks epoll for what
// each side waits for. A side that waits for nothing more (its FIN came
// and its writing side is shut) leaves the set, where it would report a
// hang-up forever. A side that waits for nothing for now is watched
// edge-triggered: it still reports a reset, but a hang-up it cannot act on
// yet (its peer's FIN came while its bytes wait for the other side, and it
// is shut for writing) is reported once, not on every wait.
func (p *pair) update(l *Loop) {
	if p.up.done && p.down.done {
		p.finish(l, false)
		return
	}
	for _, d := range [...]struct {
		s        *side
		from, to *direction
	}{{&p.cs, &p.up, &p.down}, {&p.es, &p.down, &p.up}} {
		var want uint32
		if d.from.reading() {
			want |= unix.EPOLLIN
		}
		if d.to.pending > 0 {
			want |= unix.EPOLLOUT
		}
		if want == 0 {
			want = unix.EPOLLET
		}
		if err := d.s.want(l, want, d.from.eof && d.to.done); err != nil {
			l.log.Warn("relay: epoll", "client", p.client.String(), "error", err)
			p.abort(l)
			return
		}
	}
}

// want makes the side's registration ask for events; a finished side
// leaves the set.
func (s *side) want(l *Loop, events uint32, finished bool) error {
	switch {
	case finished:
		if s.id != 0 {
			l.forget(s.fd, s.id, true)
			s.id, s.events = 0, 0
		}
		return nil
	case s.id == 0:
		id, err := l.register(s.fd, events, s)
		if err != nil {
			return err
		}
		s.id, s.events = id, events
		return nil
	case s.events != events:
		if err := l.modify(s.fd, s.id, events); err != nil {
			return err
		}
		s.events = events
	}
	return nil
}
