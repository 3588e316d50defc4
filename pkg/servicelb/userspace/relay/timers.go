package relay

import (
	"container/heap"
	"time"
)

// timer runs fire on the loop's thread at or after at, unless cancelled
// before.
type timer struct {
	at    time.Time
	fire  func()
	index int // in the heap; -1 once fired or cancelled
}

// timerHeap holds the loop's pending timers, the earliest first. A timer
// that stops mattering is cancelled, so the heap holds only the timers of
// pairs and listeners still alive, and a finished pair is not kept in
// memory by a timer that would have fired much later (a relayed pair's
// keepalive timer, keepAliveDelay).
type timerHeap []*timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *timerHeap) Push(x any) {
	t := x.(*timer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// after schedules fire at now+d.
func (l *Loop) after(d time.Duration, fire func()) *timer {
	t := &timer{at: l.now.Add(d), fire: fire}
	heap.Push(&l.timers, t)
	return t
}

// cancel takes t out of the heap if it is still there (nil: nothing).
func (l *Loop) cancel(t *timer) {
	if t != nil && t.index >= 0 {
		heap.Remove(&l.timers, t.index)
	}
}

// waitMillis is the epoll wait for the earliest timer (-1: none).
func (h timerHeap) waitMillis(now time.Time) int {
	if len(h) == 0 {
		return -1
	}
	d := h[0].at.Sub(now)
	if d <= 0 {
		return 0
	}
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// fire runs the timers that are due at now.
func (h *timerHeap) fire(now time.Time) {
	for h.Len() > 0 && !(*h)[0].at.After(now) {
		heap.Pop(h).(*timer).fire()
	}
}
