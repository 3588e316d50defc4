// Package dataplanefake is the one fake of a *dataplane.Dataplane for
// tests: it records the states it is given in place of writing the kernel,
// can fail or hold Apply, and plays the link table for the links a test
// adds and deletes, with their events. It imports nothing a product binary
// does not, and no product code imports it.
package dataplanefake

import (
	"errors"
	"slices"
	"sync"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// ErrInjected is the error of an Apply made to fail (FailNext).
var ErrInjected = errors.New("injected apply failure")

// Dataplane records applied states and holds a table of fake links. The
// zero value is ready to use. Safe for concurrent use.
type Dataplane struct {
	mu       sync.Mutex
	states   []dataplane.State
	failNext int
	gate     <-chan struct{}
	entered  chan<- struct{}
	onApply  func(dataplane.State)
	inApply  int
	maxApply int
	closed   bool
	releases int
	links    linkTable
}

// Apply records s, unless it is made to fail; while a gate is set it first
// says so on entered and waits for the gate. It deletes the fake links of
// s.Remove that are not ports of s, as the kernel would (with their
// events), and counts the first State that releases the leftovers.
func (d *Dataplane) Apply(s dataplane.State) error {
	d.mu.Lock()
	d.inApply++
	d.maxApply = max(d.maxApply, d.inApply)
	gate, entered := d.gate, d.entered
	d.mu.Unlock()
	if gate != nil {
		entered <- struct{}{}
		<-gate
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.inApply--
	if d.failNext > 0 {
		d.failNext--
		return ErrInjected
	}
	d.removeLinksLocked(s)
	if s.ReleaseLeftovers && d.releases == 0 {
		d.releases++
	}
	d.states = append(d.states, s)
	if d.onApply != nil {
		d.onApply(s)
	}
	return nil
}

// FailNext makes the next n Apply calls fail with ErrInjected.
func (d *Dataplane) FailNext(n int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failNext = n
}

// Gate makes each Apply send on entered when it starts and wait for a value
// on gate; a nil gate lets them through again.
func (d *Dataplane) Gate(gate <-chan struct{}, entered chan<- struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.gate, d.entered = gate, entered
}

// OnApply makes fn see every applied state, under the fake's lock.
func (d *Dataplane) OnApply(fn func(dataplane.State)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.onApply = fn
}

// States returns the applied states, in order.
func (d *Dataplane) States() []dataplane.State {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.states)
}

// Last returns the last applied state, and false if there is none.
func (d *Dataplane) Last() (dataplane.State, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.states) == 0 {
		return dataplane.State{}, false
	}
	return d.states[len(d.states)-1], true
}

// MaxConcurrentApplies is the largest number of Apply calls seen running
// at once.
func (d *Dataplane) MaxConcurrentApplies() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.maxApply
}

// Snapshot is the last applied state as the desired one, and the fake
// links as the ports.
func (d *Dataplane) Snapshot() (dataplane.Snapshot, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	var s dataplane.Snapshot
	if n := len(d.states); n > 0 {
		last := d.states[n-1]
		s.Desired = &last
	}
	s.Ports = d.links.list()
	return s, nil
}

// Releases is 1 once a State with ReleaseLeftovers was applied, 0 before
// (the fake holds nothing).
func (d *Dataplane) Releases() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.releases
}

// Close ends every link subscription.
func (d *Dataplane) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if !d.closed {
		d.closed = true
		d.links.closeSubscribers()
	}
	return nil
}

// Closed reports whether Close was called.
func (d *Dataplane) Closed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}
