// Package linkstest is the one fake of connlink.Handler: a Recorder of
// what the link matcher tells the proxy, for the tests of the matcher and of
// the NSM chains it is part of. Their links come from dataplanefake.
package linkstest

import (
	"fmt"
	"sync"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// Recorder is an connlink.Handler that keeps what it is told, for
// the test to read: each event rendered by Format, and the interfaces.
type Recorder struct {
	// Format renders an event (op is "created" or "deleted"); nil: the op
	// and the link index ("created 7").
	Format func(op string, i proxy.Interface) string

	mu     sync.Mutex
	events []string
	taken  int
	last   proxy.Interface
	byName map[string][]string
	ifaces map[string]proxy.Interface
	// linked are the interfaces announced and not deleted since, by
	// connection, as a Handler keeps them.
	linked map[connKey]proxy.Interface
}

type connKey struct {
	typ proxy.ConnType
	key string
}

func (r *Recorder) InterfaceCreated(i proxy.Interface) {
	r.add("created", i)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.linked == nil {
		r.linked = map[connKey]proxy.Interface{}
	}
	r.linked[connKey{i.Type, i.ConnKey}] = i
}

func (r *Recorder) InterfaceDeleted(i proxy.Interface) {
	r.add("deleted", i)
	r.mu.Lock()
	defer r.mu.Unlock()
	if cur, ok := r.linked[connKey{i.Type, i.ConnKey}]; ok && cur.Index == i.Index {
		delete(r.linked, connKey{i.Type, i.ConnKey})
	}
}

// InterfaceOf returns the interface announced for the connection and not
// deleted since.
func (r *Recorder) InterfaceOf(t proxy.ConnType, key string) (proxy.Interface, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i, ok := r.linked[connKey{t, key}]
	return i, ok
}

// InterfaceAt returns the interface announced on link index and not
// deleted since.
func (r *Recorder) InterfaceAt(index int) (proxy.Interface, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, i := range r.linked {
		if i.Index == index {
			return i, true
		}
	}
	return proxy.Interface{}, false
}

func (r *Recorder) add(op string, i proxy.Interface) {
	ev := fmt.Sprintf("%s %d", op, i.Index)
	if r.Format != nil {
		ev = r.Format(op, i)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byName == nil {
		r.byName, r.ifaces = map[string][]string{}, map[string]proxy.Interface{}
	}
	r.events = append(r.events, ev)
	r.byName[i.Name] = append(r.byName[i.Name], ev)
	r.ifaces[i.Name] = i
	r.last = i
}

// Events are the events so far.
func (r *Recorder) Events() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.events...)
}

// Take returns the events since the last Take (nil when none).
func (r *Recorder) Take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.taken == len(r.events) {
		return nil
	}
	out := append([]string(nil), r.events[r.taken:]...)
	r.taken = len(r.events)
	return out
}

// Last is the interface of the latest event.
func (r *Recorder) Last() proxy.Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.last
}

// Of returns the events of the interface called name.
func (r *Recorder) Of(name string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.byName[name]...)
}

// Interface is the interface called name as its latest event told it.
func (r *Recorder) Interface(name string) proxy.Interface {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.ifaces[name]
}
