// Package tasks owns the goroutines of one component: they run under one
// context, detached from the start-up context, and Stop cancels it and
// waits for every one of them (every goroutine has an owner that stops it
// and waits for it).
package tasks

import (
	"context"
	"sync"
)

// Group is the goroutines of one component.
type Group struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns a group whose context keeps parent's values but not its
// cancellation.
func New(parent context.Context) *Group {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	return &Group{ctx: ctx, cancel: cancel}
}

// Go runs fn in a goroutine with the group's context.
func (g *Group) Go(fn func(ctx context.Context)) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn(g.ctx)
	}()
}

// Stop cancels the group and waits for its goroutines; it never fails, and
// has the shape of a component's stop.
func (g *Group) Stop() error {
	g.cancel()
	g.wg.Wait()
	return nil
}
