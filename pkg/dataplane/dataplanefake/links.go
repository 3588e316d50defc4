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
	byName  map[string]dataplane.Link
	byIndex map[int]string
	last    int
	subs    map[int]chan dataplane.LinkEvent
	subID   int
}

func (t *linkTable) init() {
	if t.byName == nil {
		t.byName, t.byIndex, t.subs = map[string]dataplane.Link{}, map[int]string{}, map[int]chan dataplane.LinkEvent{}
		t.last = firstIndex
	}
}

func (t *linkTable) list() []dataplane.Link {
	return slices.Collect(maps.Values(t.byName))
}

func (t *linkTable) emit(ev dataplane.LinkEvent) {
	for _, c := range t.subs {
		c <- ev
	}
}

func (t *linkTable) remove(l dataplane.Link) {
	delete(t.byName, l.Name)
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
	if l, ok := d.links.byName[name]; ok {
		return l.Index
	}
	d.links.last++
	l := dataplane.Link{Index: d.links.last, Name: name, Kind: "veth", Up: true, OperState: "up"}
	d.links.byName[name] = l
	d.links.byIndex[l.Index] = name
	d.links.emit(dataplane.LinkEvent{Type: dataplane.LinkAdded, Link: l})
	return l.Index
}

// DelLink deletes link name, if it exists, and tells the subscribers.
func (d *Dataplane) DelLink(name string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	if l, ok := d.links.byName[name]; ok {
		d.links.remove(l)
	}
}

// RemoveLink deletes link index if it still exists under name, as the
// kernel would (with its event), and reports whether it did.
func (d *Dataplane) RemoveLink(index int, name string) (bool, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.links.init()
	l, ok := d.links.byName[name]
	if !ok || l.Index != index {
		return false, nil
	}
	d.links.remove(l)
	return true, nil
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
	l, ok := d.links.byName[d.links.byIndex[index]]
	return l, ok && l.Index == index
}

// LinkByName returns the link named name.
func (d *Dataplane) LinkByName(name string) (dataplane.Link, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	l, ok := d.links.byName[name]
	return l, ok
}
