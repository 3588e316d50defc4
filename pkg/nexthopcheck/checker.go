package nexthopcheck

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"
	"time"
)

// Checker probes a set of peers and judges them (see the package's
// contract).
type Checker struct {
	s     Settings
	o     options
	token []byte // the payload of our probes

	mu    sync.Mutex
	peers map[Peer]*probe
	socks map[sockKey]*echoSocket
	pkt   []byte // send buffer
	// sockErr is the last error of opening the sockets, as logged.
	sockErr string

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

// New starts a Checker with no peers (see Watch). With settings.Off it
// starts nothing.
func New(settings Settings, opts ...Option) (*Checker, error) {
	s, err := settings.withDefaults()
	if err != nil {
		return nil, err
	}
	c := &Checker{
		s: s, o: defaultOptions(), token: make([]byte, 8),
		peers: map[Peer]*probe{}, socks: map[sockKey]*echoSocket{},
		pkt:  make([]byte, 0, echoHeaderLen+8),
		stop: make(chan struct{}), done: make(chan struct{}),
	}
	for _, opt := range opts {
		opt(&c.o)
	}
	_, _ = rand.Read(c.token)
	if s.Off {
		close(c.done)
		return c, nil
	}
	go c.run()
	return c, nil
}

// Settings returns the settings in force (defaults filled in).
func (c *Checker) Settings() Settings { return c.s }

// Close stops the probing, waits for it and closes the sockets.
func (c *Checker) Close() error {
	var errs []error
	c.closeOnce.Do(func() {
		close(c.stop)
		<-c.done
		c.mu.Lock()
		defer c.mu.Unlock()
		for k, s := range c.socks {
			if err := s.close(); err != nil {
				errs = append(errs, fmt.Errorf("close probe socket: %w", err))
			}
			delete(c.socks, k)
		}
	})
	return errors.Join(errs...)
}

// Watch makes peers the set of peers checked. It opens the sockets the set
// needs and closes the others; a socket that cannot be opened leaves its
// peers Unchecked (a later Watch tries again) and its error is returned.
func (c *Checker) Watch(peers []Peer) error {
	now := time.Now()
	c.mu.Lock()
	defer c.mu.Unlock()
	want := make(map[Peer]bool, len(peers))
	for _, p := range peers {
		p = p.normal()
		want[p] = true
		if c.peers[p] == nil {
			c.peers[p] = newProbe(p, now)
		}
	}
	for p := range c.peers {
		if !want[p] {
			delete(c.peers, p)
		}
	}
	if c.s.Off {
		return nil
	}
	return c.syncSocketsLocked()
}

// syncSocketsLocked opens the sockets the peers need and closes the others.
func (c *Checker) syncSocketsLocked() error {
	need := map[sockKey]int{}
	for p := range c.peers {
		need[keyOf(p)]++
	}
	var errs []error
	for k, s := range c.socks {
		if need[k] == 0 {
			if err := s.close(); err != nil {
				errs = append(errs, fmt.Errorf("close probe socket: %w", err))
			}
			delete(c.socks, k)
		}
	}
	for k, n := range need {
		if c.socks[k] == nil {
			s, err := openEchoSocket(c.o.ns, k)
			if err != nil {
				errs = append(errs, fmt.Errorf("link %d: %w", k.link, err))
				continue
			}
			c.socks[k] = s
		}
		c.socks[k].sizeFor(n)
	}
	err := errors.Join(errs...)
	c.logSocketErrorLocked(err)
	return err
}

// logSocketErrorLocked logs the sockets' error when it changes (a Watch
// that fails the same way again is not logged again).
func (c *Checker) logSocketErrorLocked(err error) {
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	switch {
	case msg == c.sockErr:
	case err != nil:
		c.o.log.Warn("nexthop check: probe sockets; their peers are unchecked", "error", err)
	default:
		c.o.log.Info("nexthop check: probe sockets open")
	}
	c.sockErr = msg
}

// run ticks until Close.
func (c *Checker) run() {
	defer close(c.done)
	t := time.NewTicker(c.s.Interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
			if changes := c.round(time.Now()); len(changes) > 0 {
				c.o.onChange(changes)
			}
		}
	}
}
