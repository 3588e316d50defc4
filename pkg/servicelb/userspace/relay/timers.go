package relay

import (
	"container/heap"
	"time"
)

// timer runs fire on the loop's thread at or after at.
type timer struct {
	at   time.Time
	fire func()
}

// timerHeap holds the loop's timers, the earliest first. A timer is never
// cancelled: fire checks whether it still matters.
type timerHeap []timer

func (h timerHeap) Len() int           { return len(h) }
func (h timerHeap) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timerHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timerHeap) Push(x any)        { *h = append(*h, x.(timer)) }
func (h *timerHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// after schedules fire at now+d.
func (l *Loop) after(d time.Duration, fire func()) {
	heap.Push(&l.timers, timer{at: l.now.Add(d), fire: fire})
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
		heap.Pop(h).(timer).fire()
	}
}
