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

func TestFakeAfterFuncRunsInAdvance(t *testing.T) {
	c := NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var calls []string
	c.AfterFunc(2*time.Second, func() {
		// The clock is usable from the function: re-arm.
		calls = append(calls, "late")
		c.AfterFunc(time.Second, func() { calls = append(calls, "re-armed") })
	})
	c.AfterFunc(time.Second, func() { calls = append(calls, "early") })
	stopped := c.AfterFunc(time.Second, func() { calls = append(calls, "stopped") })
	if !stopped.Stop() || stopped.C() != nil {
		t.Fatal("Stop of a waiting AfterFunc timer must report it active; its C is nil")
	}
	c.Advance(time.Second)
	if len(calls) != 1 || calls[0] != "early" {
		t.Fatalf("after 1s: %v", calls)
	}
	c.Advance(time.Second)
	c.Advance(time.Second)
	if want := []string{"early", "late", "re-armed"}; len(calls) != 3 || calls[1] != want[1] || calls[2] != want[2] {
		t.Fatalf("after 3s: %v, want %v", calls, want)
	}
	if c.Active() != 0 {
		t.Fatalf("%d active timers, want 0", c.Active())
	}
}

func TestRealAfterFunc(t *testing.T) {
	done := make(chan struct{})
	tm := Real().AfterFunc(time.Millisecond, func() { close(done) })
	<-done
	if tm.Stop() {
		t.Fatal("Stop of a fired AfterFunc timer reported it active")
	}
	if Real().AfterFunc(time.Hour, func() { t.Error("a stopped AfterFunc timer ran") }).Stop() != true {
		t.Fatal("Stop of a waiting AfterFunc timer must report it active")
	}
}
