package proxy

import "time"

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
