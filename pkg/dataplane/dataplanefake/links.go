package dataplanefake

import (
	"maps"
	"slices"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// firstIndex is the index below the first fake link's.
const firstIndex = 10

// subscriberBuffer is large enough for any test: link events are never
// dropped.
const subscriberBuffer = 1024

// linkTable is the fake's links and the subscribers to their events. The
// Dataplane's mutex guards it.
type linkTable struct {
	byIndex map[int]dataplane.Link
	last    int
	subs    map[int]chan dataplane.LinkEvent
	subID   int
}

func (t *linkTable) init() {
	if t.byIndex == nil {
		t.byIndex, t.subs = map[int]dataplane.Link{}, map[int]chan dataplane.LinkEvent{}
		t.last = firstIndex
	}
}

func (t *linkTable) list() []dataplane.Link {
	return slices.SortedFunc(maps.Values(t.byIndex), func(a, b dataplane.Link) int { return a.Index - b.Index })
}

// byName is the link named name (the one with the highest index if a test
// left two).
func (t *linkTable) byName(name string) (dataplane.Link, bool) {
	var found dataplane.Link
	for _, l := range t.byIndex {
		if l.Name == name && l.Index > found.Index {
			found = l
		}
	}
	return found, found.Index > 0
}

func (t *linkTable) emit(ev dataplane.LinkEvent) {
	for _, c := range t.subs {
		c <- ev
	}
}

func (t *linkTable) remove(l dataplane.Link) {
	delete(t.byIndex, l.Index)
	t.emit(dataplane.LinkEvent{Type: dataplane.LinkDeleted, Link: l})
}

func (t *linkTable) closeSubscribers() {
	for id, c := range t.subs {
		delete(t.subs, id)
		close(c)
	}
}

// AddLink creates an up veth named name (unless it exists), tells the
// subscribers, and returns its index.
func (d *Dataplane) AddLink(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	if l, ok := d.links.byName(name); ok {
		return l.Index
	}
	return d.setLinkLocked(max(d.links.last, firstIndex)+1, name).Link.Index
}

// SetLink makes link index exist, up, with name (added, or renamed), tells
// the subscribers, and returns the event the dataplane's link table would
// send, for a test that hands it to a consumer itself (a link matcher's
// HandleLinkEvent).
func (d *Dataplane) SetLink(index int, name string) dataplane.LinkEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	return d.setLinkLocked(index, name)
}

func (d *Dataplane) setLinkLocked(index int, name string) dataplane.LinkEvent {
	typ := dataplane.LinkChanged
	if _, ok := d.links.byIndex[index]; !ok {
		typ = dataplane.LinkAdded
	}
	l := dataplane.Link{Index: index, Name: name, Kind: "veth", Up: true, OperState: "up"}
	d.links.byIndex[index] = l
	d.links.last = max(d.links.last, index)
	ev := dataplane.LinkEvent{Type: typ, Link: l}
	d.links.emit(ev)
	return ev
}

// DeleteLink removes link index (whether or not it exists), tells the
// subscribers, and returns the event the dataplane's link table would send.
func (d *Dataplane) DeleteLink(index int) dataplane.LinkEvent {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	l, ok := d.links.byIndex[index]
	if !ok {
		l = dataplane.Link{Index: index}
	}
	d.links.remove(l)
	return dataplane.LinkEvent{Type: dataplane.LinkDeleted, Link: l}
}

// DelLink deletes link name, if it exists, and tells the subscribers.
func (d *Dataplane) DelLink(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	if l, ok := d.links.byName(name); ok {
		d.links.remove(l)
	}
}

// removeLinksLocked deletes the links of s.Remove that still exist under
// their name and are not ports of s, as the Dataplane does.
func (d *Dataplane) removeLinksLocked(s dataplane.State) {
	d.links.init()
	for _, r := range s.Remove {
		l, ok := d.links.byIndex[r.Index]
		port := slices.ContainsFunc(s.Ports, func(p dataplane.Port) bool { return p.Index == r.Index })
		if ok && l.Name == r.Name && !port {
			d.links.remove(l)
		}
	}
}

// Subscribe returns the link events from now on and a function that ends
// the subscription; after Close the channel is closed at once.
func (d *Dataplane) Subscribe() (<-chan dataplane.LinkEvent, func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	ch := make(chan dataplane.LinkEvent, subscriberBuffer)
	if d.closed {
		close(ch)
		return ch, func() {}
	}
	d.links.subID++
	id := d.links.subID
	d.links.subs[id] = ch
	return ch, func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if c, ok := d.links.subs[id]; ok {
			delete(d.links.subs, id)
			close(c)
		}
	}
}

// Link returns link index.
func (d *Dataplane) Link(index int) (dataplane.Link, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.links.byIndex[index]
	return l, ok
}

// LinkByName returns the link named name (the one with the highest index
// if a test left two).
func (d *Dataplane) LinkByName(name string) (dataplane.Link, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.links.byName(name)
}
