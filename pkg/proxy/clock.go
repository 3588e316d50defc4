package proxy

import "time"

// Clock makes timers; tests replace it to drive release delays and bridge
// renewals without waiting.
type Clock interface {
	NewTimer(d time.Duration) Timer
}

// Timer is the part of *time.Timer the proxy uses.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
}

type realClock struct{}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time { return t.t.C }
func (t realTimer) Stop() bool          { return t.t.Stop() }

// sleep waits d of real time or until done is closed; it reports whether the
// full wait elapsed.
func sleep(done <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-done:
		return false
	}
}
