package interfacemonitor

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"sync"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// ErrSourceClosed is returned by Run when the link event channel is closed.
var ErrSourceClosed = errors.New("link event source closed")

type connKey struct {
	typ proxy.ConnType
	id  string
}

// expectation is the interface a connection is waiting for or has got.
type expectation struct {
	iface  proxy.Interface // Index is set only while active
	active bool
	lost   bool // the announced link went away in the kernel, not yet back
}

// Monitor matches expected interfaces (recorded by the NSM elements) with
// kernel links (fed by a link event source) and reports the matches to a
// Handler. It is safe for concurrent use.
type Monitor struct {
	handler Handler
	logger  *slog.Logger

	mu       sync.Mutex
	links    map[int]string           // present links: index → name
	linkIdx  map[string]int           // present links: name → index
	expected map[connKey]*expectation // by connection
	byName   map[string]connKey       // expected name → connection
	byIndex  map[int]connKey          // active index → connection
}

// New returns a Monitor reporting to handler.
func New(handler Handler, opts ...Option) *Monitor {
	o := newOptions(opts)
	return &Monitor{
		handler:  handler,
		logger:   o.logger,
		links:    make(map[int]string),
		linkIdx:  make(map[string]int),
		expected: make(map[connKey]*expectation),
		byName:   make(map[string]connKey),
		byIndex:  make(map[int]connKey),
	}
}

// Run consumes link events until ctx is done (it then returns nil) or the
// channel is closed (ErrSourceClosed). The caller owns the goroutine.
func (m *Monitor) Run(ctx context.Context, events <-chan LinkEvent) error {
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-events:
			if !ok {
				return ErrSourceClosed
			}
			m.HandleLinkEvent(ev)
		}
	}
}

// HandleLinkEvent applies one kernel link event.
func (m *Monitor) HandleLinkEvent(ev LinkEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ev.Deleted {
		m.linkDeleted(ev.Index)
		return
	}
	m.linkPresent(ev.Index, ev.Name)
}

func (m *Monitor) linkPresent(index int, name string) {
	if old, ok := m.links[index]; ok && old != name {
		// Renamed: whatever was matched on the old name no longer is.
		if m.linkIdx[old] == index {
			delete(m.linkIdx, old)
		}
		m.markLost(m.deactivate(index))
	}
	if other, ok := m.linkIdx[name]; ok && other != index {
		// A link of that name with another index: its delete was missed.
		delete(m.links, other)
		m.markLost(m.deactivate(other))
	}
	m.links[index] = name
	m.linkIdx[name] = index
	if k, ok := m.byName[name]; ok {
		if e := m.expected[k]; !e.active {
			m.activate(k, e, index)
		}
	}
}

func (m *Monitor) linkDeleted(index int) {
	if name, ok := m.links[index]; ok {
		delete(m.links, index)
		if m.linkIdx[name] == index {
			delete(m.linkIdx, name)
		}
	}
	// The connection may live on (a heal may create the link again under
	// the same name): keep its expectation, pending.
	m.markLost(m.deactivate(index))
}

// markLost records that the link of connection k went away in the kernel.
func (m *Monitor) markLost(k connKey, ok bool) {
	if e := m.expected[k]; ok && e != nil {
		e.lost = true
	}
}

// activate announces the interface of connection k on link index.
func (m *Monitor) activate(k connKey, e *expectation, index int) {
	e.iface.Index = index
	e.active = true
	e.lost = false
	m.byIndex[index] = k
	m.logger.Debug("interface created", "name", e.iface.Name, "index", index, "type", k.typ.String(), "conn", k.id)
	m.handler.InterfaceCreated(e.iface)
}

// deactivate withdraws the interface announced on link index, if any, and
// says whose it was.
func (m *Monitor) deactivate(index int) (connKey, bool) {
	k, ok := m.byIndex[index]
	if !ok {
		return k, false
	}
	delete(m.byIndex, index)
	e := m.expected[k]
	m.logger.Debug("interface deleted", "name", e.iface.Name, "index", index, "type", k.typ.String(), "conn", k.id)
	m.handler.InterfaceDeleted(e.iface)
	e.active = false
	e.iface.Index = 0
	return k, true
}

// Expect records the interface (name, type, connection id and addresses; the
// index is ignored) of an established connection. If the link already
// exists, it is announced at once; otherwise when it appears. Recording the
// same connection again (a refresh) changes nothing unless the name or the
// addresses changed, in which case the old interface is withdrawn first.
func (m *Monitor) Expect(iface proxy.Interface) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := connKey{iface.Type, iface.ConnID}
	iface.Index = 0
	if old, ok := m.expected[k]; ok {
		if sameInterface(old.iface, iface) {
			return
		}
		m.drop(k, old)
	}
	if other, ok := m.byName[iface.Name]; ok {
		// Names are unique in a namespace: the other connection's claim
		// is stale.
		m.drop(other, m.expected[other])
	}
	e := &expectation{iface: iface}
	m.expected[k] = e
	m.byName[iface.Name] = k
	if index, ok := m.linkIdx[iface.Name]; ok {
		m.activate(k, e, index)
	}
}

// Lost reports whether the kernel link of the connection (of type t, with
// id connID) was announced and has gone away since, and not come back: its
// data path is broken. A connection whose link has not been seen yet, or
// that the monitor does not know, is not lost.
func (m *Monitor) Lost(t proxy.ConnType, connID string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.expected[connKey{t, connID}]
	return ok && e.lost
}

// Forget removes the expectation of a closed connection, withdrawing its
// interface if it was announced.
func (m *Monitor) Forget(t proxy.ConnType, connID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := connKey{t, connID}
	if e, ok := m.expected[k]; ok {
		m.drop(k, e)
	}
}

func (m *Monitor) drop(k connKey, e *expectation) {
	if e.active {
		m.deactivate(e.iface.Index)
	}
	delete(m.expected, k)
	if m.byName[e.iface.Name] == k {
		delete(m.byName, e.iface.Name)
	}
}

func sameInterface(a, b proxy.Interface) bool {
	return a.Name == b.Name &&
		samePrefixes(a.LocalAddrs, b.LocalAddrs) &&
		sameAddrs(a.NeighborAddrs, b.NeighborAddrs)
}

func samePrefixes(a, b []netip.Prefix) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	cmp := func(p, q netip.Prefix) int {
		if c := p.Addr().Compare(q.Addr()); c != 0 {
			return c
		}
		return p.Bits() - q.Bits()
	}
	slices.SortFunc(x, cmp)
	slices.SortFunc(y, cmp)
	return slices.Equal(x, y)
}

func sameAddrs(a, b []netip.Addr) bool {
	if len(a) != len(b) {
		return false
	}
	x, y := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(x, netip.Addr.Compare)
	slices.SortFunc(y, netip.Addr.Compare)
	return slices.Equal(x, y)
}
