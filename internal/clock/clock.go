// Package clock is the one way Causeway's packages take time from outside:
// a component that reads the time or waits on timers that a test must drive
// takes a Clock, Real in production, a *Fake in tests.
package clock

import "time"

// Clock tells the time and makes timers.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f, in a goroutine of its own, once d has passed,
	// unless the returned timer is stopped first; that timer's C is nil.
	// It holds no goroutine while it waits.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is the part of *time.Timer that Causeway uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

// Real is the system clock.
func Real() Clock { return realClock{} }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return realTimer{time.AfterFunc(d, f)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }
