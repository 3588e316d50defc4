package clock

import (
	"sync"
	"time"
)

// Fake is a clock for tests: its time moves only with Advance, which also
// fires the timers that are then due and, before it returns, calls the
// functions of the AfterFunc timers that are due. The zero value starts at
// the zero time; it is safe for concurrent use.
type Fake struct {
	mu      sync.Mutex
	elapsed time.Duration
	start   time.Time
	timers  []*fakeTimer
}

// NewFake returns a fake clock that starts at start.
func NewFake(start time.Time) *Fake { return &Fake{start: start} }

type fakeTimer struct {
	c        *Fake
	deadline time.Duration
	ch       chan time.Time // nil for an AfterFunc timer
	f        func()         // AfterFunc's function
	stopped  bool
	fired    bool
}

// Now is the start plus every Advance so far.
func (c *Fake) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.start.Add(c.elapsed)
}

// NewTimer returns a timer that fires once the clock has advanced by d.
func (c *Fake) NewTimer(d time.Duration) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, deadline: c.elapsed + d, ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, t)
	return t
}

// AfterFunc returns a timer that calls f once the clock has advanced by d:
// Advance calls it, after releasing the clock, so that f may use the clock.
func (c *Fake) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, deadline: c.elapsed + d, f: f}
	c.timers = append(c.timers, t)
	return t
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	active := !t.stopped && !t.fired
	t.stopped = true
	return active
}

// Active counts the timers that are neither stopped nor fired.
func (c *Fake) Active() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, t := range c.timers {
		if !t.stopped && !t.fired {
			n++
		}
	}
	return n
}

// Advance moves the time forward by d, fires the timers that are due and
// then, in the order they were made, calls the functions of the AfterFunc
// timers that are due.
func (c *Fake) Advance(d time.Duration) {
	for _, f := range c.advance(d) {
		f()
	}
}

// advance moves the time and fires the channel timers that are due; it
// returns the functions of the due AfterFunc timers, to be called unlocked.
func (c *Fake) advance(d time.Duration) []func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.elapsed += d
	now := c.start.Add(c.elapsed)
	var due []func()
	kept := c.timers[:0]
	for _, t := range c.timers {
		if !t.stopped && !t.fired && t.deadline <= c.elapsed {
			t.fired = true
			if t.f != nil {
				due = append(due, t.f)
			} else {
				t.ch <- now
			}
		}
		if !t.stopped && !t.fired {
			kept = append(kept, t)
		}
	}
	c.timers = kept
	return due
}
