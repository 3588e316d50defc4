// Package linkstest provides, for tests of the link matcher and of the
// NSM chains it is part of, an in-memory table of links where no kernel (and
// no dataplane link table) is at hand, and a Recorder of what the matcher
// tells its handler.
package linkstest

import (
	"sync"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// Table is a connlink.Links that the test changes. Each change
// returns the event the dataplane's link table would send, for the test
// to hand to the Matcher (HandleLinkEvent) when it wants it handled.
type Table struct {
	mu    sync.Mutex
	links map[int]dataplane.Link
}

// New returns an empty table.
func New() *Table { return &Table{links: map[int]dataplane.Link{}} }

// Set makes link index exist with name (added, or renamed).
func (t *Table) Set(index int, name string) dataplane.LinkEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	typ := dataplane.LinkChanged
	if _, ok := t.links[index]; !ok {
		typ = dataplane.LinkAdded
	}
	l := dataplane.Link{Index: index, Name: name, Kind: "veth", Up: true}
	t.links[index] = l
	return dataplane.LinkEvent{Type: typ, Link: l}
}

// Delete removes link index.
func (t *Table) Delete(index int) dataplane.LinkEvent {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.links[index]
	if !ok {
		l = dataplane.Link{Index: index}
	}
	delete(t.links, index)
	return dataplane.LinkEvent{Type: dataplane.LinkDeleted, Link: l}
}

// Link returns link index.
func (t *Table) Link(index int) (dataplane.Link, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	l, ok := t.links[index]
	return l, ok
}

// LinkByName returns the link named name (the one with the highest index
// if a test left two).
func (t *Table) LinkByName(name string) (dataplane.Link, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var found dataplane.Link
	for _, l := range t.links {
		if l.Name == name && l.Index > found.Index {
			found = l
		}
	}
	return found, found.Index > 0
}
