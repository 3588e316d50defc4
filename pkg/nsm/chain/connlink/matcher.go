package connlink

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// ErrSourceClosed is returned by Run when the link event channel is closed.
var ErrSourceClosed = errors.New("link event source closed")

type connKey struct {
	typ proxy.ConnType
	key string
}

// expectation is the interface name of an established connection, as its
// NSM elements recorded it. Which link it is on is the Handler's to keep:
// the Matcher asks it (InterfaceOf, InterfaceAt) and keeps no copy.
type expectation struct {
	name string
	conn string // the NSM connection that recorded it ("" if not said)
	lost bool   // the announced link went away in the kernel, not yet back
}

// Matcher matches the interfaces of established connections (recorded by
// the NSM elements) with the kernel links of the Links table, and reports
// the matches to a Handler. It is safe for concurrent use.
type Matcher struct {
	handler Handler
	links   Links
	logger  *slog.Logger

	mu       sync.Mutex
	expected map[connKey]*expectation // by connection
	byName   map[string]connKey       // expected name → connection
}

// New returns a Matcher that reads the links of links and reports to
// handler.
func New(handler Handler, links Links, opts ...Option) *Matcher {
	o := newOptions(opts)
	return &Matcher{
		handler:  handler,
		links:    links,
		logger:   o.logger,
		expected: make(map[connKey]*expectation),
		byName:   make(map[string]connKey),
	}
}

// Run applies the link events of the Links table's subscription until ctx
// is done (it then returns nil) or the channel is closed (ErrSourceClosed).
// The caller owns the goroutine.
func (m *Matcher) Run(ctx context.Context, events <-chan dataplane.LinkEvent) error {
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

// HandleLinkEvent looks again at the link an event is about. The event says
// only which link changed: what the link is now (its name, or that it is
// gone) is read from the Links table, so that an event handled late (after
// an Expect read the table) never undoes what the table already says.
func (m *Matcher) HandleLinkEvent(ev dataplane.LinkEvent) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links.Link(ev.Index)
	if !ok {
		// The connection may live on (a heal may create the link again
		// under the same name): keep its expectation, pending.
		m.markLost(m.deactivateAt(ev.Index))
		return
	}
	m.linkPresent(l.Index, l.Name)
}

// linkPresent matches link index, now named name.
func (m *Matcher) linkPresent(index int, name string) {
	if cur, ok := m.handler.InterfaceAt(index); ok {
		if cur.Name == name {
			return // the same link, e.g. a flags change
		}
		// Renamed: no longer the connection's interface.
		m.markLost(m.deactivate(cur))
	}
	k, ok := m.byName[name]
	if !ok {
		return
	}
	if cur, ok := m.handler.InterfaceOf(k.typ, k.key); ok {
		// The name is on a new link: the old one's delete is still to
		// come, or was missed.
		m.markLost(m.deactivate(cur))
	}
	m.activate(k, m.expected[k], index)
}

// markLost records that the link of connection k went away in the kernel.
func (m *Matcher) markLost(k connKey, ok bool) {
	if e := m.expected[k]; ok && e != nil {
		e.lost = true
	}
}

// activate announces the interface of connection k on link index.
func (m *Matcher) activate(k connKey, e *expectation, index int) {
	e.lost = false
	m.logger.Debug("interface created", "name", e.name, "index", index, "type", k.typ.String(), "conn", k.key)
	m.handler.InterfaceCreated(proxy.Interface{Index: index, Name: e.name, Type: k.typ, ConnKey: k.key})
}

// deactivateAt withdraws the interface announced on link index, if any,
// and says whose it was.
func (m *Matcher) deactivateAt(index int) (connKey, bool) {
	cur, ok := m.handler.InterfaceAt(index)
	if !ok {
		return connKey{}, false
	}
	return m.deactivate(cur)
}

// deactivate withdraws the announced interface iface and says whose it
// was.
func (m *Matcher) deactivate(iface proxy.Interface) (connKey, bool) {
	m.logger.Debug("interface deleted", "name", iface.Name, "index", iface.Index, "type", iface.Type.String(), "conn", iface.ConnKey)
	m.handler.InterfaceDeleted(iface)
	return connKey{iface.Type, iface.ConnKey}, true
}

// Expect records the interface (name, type and connection key; the index is
// ignored) of an established connection. If the Links table has a link of
// that name, it is announced at once; otherwise when it appears. Recording
// the same connection again (a refresh) changes nothing unless the name
// changed, in which case the old interface is withdrawn first. A refresh
// that changes the connection's addresses is the proxy's own business: it
// holds them.
func (m *Matcher) Expect(iface proxy.Interface) { m.ExpectConn("", iface) }

// ExpectConn is Expect for the NSM connection connID (the proxy's side of
// it): ForgetConn of another connection with the same key does not forget
// the expectation (see ForgetConn).
func (m *Matcher) ExpectConn(connID string, iface proxy.Interface) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := connKey{iface.Type, iface.ConnKey}
	if old, ok := m.expected[k]; ok {
		if old.name == iface.Name {
			old.conn = connID
			return
		}
		m.drop(k, old)
	}
	if other, ok := m.byName[iface.Name]; ok {
		// Names are unique in a namespace: the other connection's claim
		// is stale.
		m.drop(other, m.expected[other])
	}
	e := &expectation{name: iface.Name, conn: connID}
	m.expected[k] = e
	m.byName[iface.Name] = k
	if l, ok := m.links.LinkByName(iface.Name); ok {
		// The link may still carry another connection's interface under
		// its old name (its rename is still to be handled).
		m.markLost(m.deactivateAt(l.Index))
		m.activate(k, e, l.Index)
	}
}

// Lost reports whether the kernel link of the connection (of type t, with
// key key) was announced and has gone away since, and not come back: its
// data path is broken. A connection whose link has not been seen yet, or
// that the matcher does not know, is not lost.
func (m *Matcher) Lost(t proxy.ConnType, key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.expected[connKey{t, key}]
	return ok && e.lost
}

// Forget removes the expectation of a closed connection (of type t, with
// key key), withdrawing its interface if it was announced.
func (m *Matcher) Forget(t proxy.ConnType, key string) { m.ForgetConn(t, key, "") }

// ForgetConn is Forget for the close of the NSM connection connID. If
// another connection with the same key recorded the expectation (a target
// that healed through another path gets a new proxy-side connection id, and
// the old path's connection is closed later), it is that connection's and
// stays.
func (m *Matcher) ForgetConn(t proxy.ConnType, key, connID string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	k := connKey{t, key}
	e, ok := m.expected[k]
	if !ok {
		return
	}
	if e.conn != "" && connID != "" && e.conn != connID {
		m.logger.Info("close of a superseded connection: its interface is another connection's now", "type", t.String(),
			"conn", key, "closed", connID, "current", e.conn, "name", e.name)
		return
	}
	m.drop(k, e)
}

func (m *Matcher) drop(k connKey, e *expectation) {
	if cur, ok := m.handler.InterfaceOf(k.typ, k.key); ok {
		m.deactivate(cur)
	}
	delete(m.expected, k)
	if m.byName[e.name] == k {
		delete(m.byName, e.name)
	}
}
