package clock

import (
	"testing"
	"time"
)

func TestFakeFiresDueTimersOnAdvance(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := NewFake(start)
	short, long, stopped := c.NewTimer(time.Second), c.NewTimer(time.Minute), c.NewTimer(time.Second)
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports the timer active once, then not")
	}
	if c.Active() != 2 {
		t.Fatalf("%d active timers, want 2", c.Active())
	}
	c.Advance(time.Second)
	select {
	case at := <-short.C():
		if !at.Equal(start.Add(time.Second)) || !c.Now().Equal(at) {
			t.Fatalf("fired at %v, now %v", at, c.Now())
		}
	default:
		t.Fatal("the due timer did not fire")
	}
	select {
	case <-long.C():
		t.Fatal("a timer fired early")
	case <-stopped.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	if short.Stop() || c.Active() != 1 {
		t.Fatalf("after firing: Stop true or %d active timers", c.Active())
	}
	c.Advance(time.Hour)
	<-long.C()
	if c.Active() != 0 {
		t.Fatalf("%d active timers, want 0", c.Active())
	}
}

func TestRealTimer(t *testing.T) {
	c := Real()
	before := time.Now()
	tm := c.NewTimer(time.Millisecond)
	<-tm.C()
	if c.Now().Before(before) {
		t.Fatal("Real().Now went backwards")
	}
	if tm.Stop() {
		t.Fatal("Stop of a fired timer reported it active")
	}
}
