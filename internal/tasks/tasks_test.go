package tasks

import (
	"context"
	"sync/atomic"
	"testing"
)

func TestStopCancelsAndWaits(t *testing.T) {
	parent, cancel := context.WithCancel(context.Background())
	g := New(parent)
	cancel() // the group outlives its start-up context
	var done atomic.Int32
	for range 3 {
		g.Go(func(ctx context.Context) {
			<-ctx.Done()
			done.Add(1)
		})
	}
	if err := g.Stop(); err != nil {
		t.Fatal(err)
	}
	if done.Load() != 3 {
		t.Fatalf("%d of 3 goroutines ended before Stop returned", done.Load())
	}
}
