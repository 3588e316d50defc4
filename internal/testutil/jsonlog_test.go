package testutil

import (
	"fmt"
	"testing"
	"time"
)

func TestJSONLogFindsWaitsAndCounts(t *testing.T) {
	var l JSONLog
	fmt.Fprint(&l, `{"msg":"a","k":"1"}`+"\nnot json\n"+`{"msg":"b"}`+"\n"+`{"msg":"a","k":"2"`)
	if _, i := l.Find(0, "a", "k", "2"); i != -1 {
		t.Fatalf("an unfinished line was found at %d", i)
	}
	fmt.Fprint(&l, "}\n")
	if n := l.Count("a"); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	if m, i := l.Find(1, "a"); i != 2 || m["k"] != "2" {
		t.Fatalf("from 1: line %d %v", i, m)
	}

	go func() {
		time.Sleep(10 * time.Millisecond)
		fmt.Fprintln(&l, `{"msg":"c"}`)
	}()
	if _, i := l.Wait(time.Minute, nil, 0, "c"); i != 3 {
		t.Fatalf("waited line at %d", i)
	}
	stopped := make(chan struct{})
	close(stopped)
	if _, i := l.Wait(time.Minute, stopped, 0, "never"); i != -1 {
		t.Fatalf("a stopped writer's line at %d", i)
	}
	if _, i := l.Wait(time.Millisecond, nil, 0, "never"); i != -1 {
		t.Fatalf("after the timeout: %d", i)
	}
	if got := len(l.Lines()); got != 4 {
		t.Fatalf("%d lines, want 4", got)
	}
}
