package dataplane

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/backoff"
)

// LinkEventType says what happened to a link.
type LinkEventType int

// Link event types.
const (
	// LinkAdded: a link appeared (or was first seen by a resync).
	LinkAdded LinkEventType = iota + 1
	// LinkChanged: one of Link's fields changed (name, master, MTU, flags,
	// operational state, MAC).
	LinkChanged
	// LinkDeleted: the link is gone.
	LinkDeleted
)

func (t LinkEventType) String() string {
	switch t {
	case LinkAdded:
		return "added"
	case LinkChanged:
		return "changed"
	case LinkDeleted:
		return "deleted"
	default:
		return "unknown"
	}
}

// MarshalText makes LinkEventType readable in JSON.
func (t LinkEventType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// Link is the link table's view of one network interface of the
// namespace.
type Link struct {
	Index int    `json:"index"`
	Name  string `json:"name"`
	// Kind is the rtnetlink link kind ("veth", "bridge", "device", ...).
	Kind        string `json:"kind"`
	MasterIndex int    `json:"master,omitempty"`
	MTU         int    `json:"mtu"`
	// Up is the administrative state (IFF_UP); OperState the operational
	// one ("up", "down", "unknown", ...).
	Up           bool   `json:"up"`
	OperState    string `json:"operState"`
	HardwareAddr string `json:"mac,omitempty"`
}

// LinkEvent is one change seen by the link table.
type LinkEvent struct {
	Type LinkEventType `json:"type"`
	Link
	// Resync is true when the event was synthesised by a full re-sync after
	// the kernel subscription was lost (socket overrun or error) rather than
	// read from a notification: the link table lists the links and reports the
	// differences, so that no delete is missed.
	Resync bool `json:"resync,omitempty"`
}

func toLink(l netlink.Link) Link {
	a := l.Attrs()
	return Link{
		Index:        a.Index,
		Name:         a.Name,
		Kind:         l.Type(),
		MasterIndex:  a.MasterIndex,
		MTU:          a.MTU,
		Up:           a.Flags&net.FlagUp != 0,
		OperState:    a.OperState.String(),
		HardwareAddr: a.HardwareAddr.String(),
	}
}

// subscriptionBuffer is how many updates a subscription's channel holds
// between the netlink library's reader and the handler. The kernel socket's
// receive buffer (Options.ReceiveBuffer, 4 MiB by default) holds a burst;
// the channel only lets the reader read ahead while the handler works. It is
// allocated for the proxy's whole life: 256 route updates are 98 KB (384
// bytes each), 1,024 were 393 KB, and the four subscriptions' channels were
// 0.74 MB of the proxy's live heap (docs/proxy-memory.md).
const subscriptionBuffer = 256

// linkChanBuffer is the buffer between the netlink reader and the link table
// (a variable so that tests can make the reader stall).
var linkChanBuffer = subscriptionBuffer

// listLinks lists the links of h's namespace (a variable so that tests can
// make the listing fail).
var listLinks = (*netlink.Handle).LinkList

// linkTable keeps a model of the namespace's links from a netlink link
// subscription, re-subscribing and re-syncing whenever the subscription is
// lost, and fans the changes out to subscribers without ever blocking its
// reader.
type linkTable struct {
	ns     netns.NsHandle
	h      *netlink.Handle
	log    *slog.Logger
	rcvbuf int

	// internal is called (from the reader goroutine, with no lock held) for
	// every event; it must not block.
	internal func(LinkEvent)

	mu       sync.Mutex
	synced   bool
	links    map[int]Link   // the namespace's links by index: the proxy's one table of links
	byName   map[string]int // the same links' indexes by name
	subs     map[*subscriber]struct{}
	closed   bool
	syncedCh chan struct{}

	resubscribes atomic.Uint64
	resyncs      atomic.Uint64
	events       atomic.Uint64
}

func newLinkTable(ns netns.NsHandle, h *netlink.Handle, log *slog.Logger, rcvbuf int) *linkTable {
	return &linkTable{
		ns:       ns,
		h:        h,
		log:      log,
		rcvbuf:   rcvbuf,
		links:    map[int]Link{},
		byName:   map[string]int{},
		subs:     map[*subscriber]struct{}{},
		syncedCh: make(chan struct{}),
	}
}

func (m *linkTable) run(ctx context.Context) {
	runSubscription(ctx, "link", m.log, linkChanBuffer,
		func(ch chan netlink.LinkUpdate, done chan struct{}, cb func(error)) error {
			ns := m.ns
			err := netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
				Namespace:              &ns,
				ErrorCallback:          cb,
				ReceiveBufferSize:      m.rcvbuf,
				ReceiveBufferForceSize: true,
			})
			if err != nil && m.rcvbuf != 0 {
				// SO_RCVBUFFORCE needs CAP_NET_ADMIN; fall back to the
				// default buffer.
				err = netlink.LinkSubscribeWithOptions(ch, done, netlink.LinkSubscribeOptions{
					Namespace: &ns, ErrorCallback: cb,
				})
			}
			return err
		},
		m.resync, m.handle,
		func() { m.resubscribes.Add(1) })
}

// resync lists the links and reports every difference with the model. It
// runs right after each (re)subscription, before any queued notification is
// handled, so the notifications that follow apply on top of the listing.
// It reports false when the links could not be listed: the model is then
// not synced (the changes missed while no subscription was open are not
// in it), and the subscription starts over.
func (m *linkTable) resync(first bool) bool {
	var links []netlink.Link
	var err error
	for i := 0; i < 5; i++ {
		links, err = listLinks(m.h)
		if err == nil {
			break
		}
		time.Sleep(time.Duration(i+1) * 5 * time.Millisecond)
	}
	if err != nil {
		m.log.Error("link table: list links; subscribing and listing again", "error", err)
		return false
	}
	m.resyncs.Add(1)
	m.mu.Lock()
	seen := make(map[int]struct{}, len(links))
	var evs []LinkEvent
	for _, nl := range links {
		l := toLink(nl)
		seen[l.Index] = struct{}{}
		old, ok := m.links[l.Index]
		m.setLocked(l)
		switch {
		case !ok:
			evs = append(evs, LinkEvent{Type: LinkAdded, Link: l, Resync: true})
		case old != l:
			evs = append(evs, LinkEvent{Type: LinkChanged, Link: l, Resync: true})
		}
	}
	for idx, l := range m.links {
		if _, ok := seen[idx]; !ok {
			m.deleteLocked(idx)
			evs = append(evs, LinkEvent{Type: LinkDeleted, Link: l, Resync: true})
		}
	}
	m.mu.Unlock()
	if first {
		m.markSynced()
		return true
	}
	slices.SortFunc(evs, func(a, b LinkEvent) int { return a.Index - b.Index })
	m.deliver(evs)
	return true
}

func (m *linkTable) markSynced() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.synced {
		m.synced = true
		close(m.syncedCh)
	}
}

func (m *linkTable) handle(u netlink.LinkUpdate) {
	// The bridge sends RTM_NEWLINK/RTM_DELLINK with family AF_BRIDGE about
	// its ports (a DELLINK when a port leaves the bridge); they are not
	// link deletions. The AF_UNSPEC notifications carry the link changes.
	if u.IfInfomsg.Family == unix.AF_BRIDGE || u.Link == nil {
		return
	}
	l := toLink(u.Link)
	if l.Index == 0 {
		l.Index = int(u.IfInfomsg.Index)
	}
	m.events.Add(1)
	var ev LinkEvent
	m.mu.Lock()
	switch u.Header.Type {
	case unix.RTM_NEWLINK:
		old, ok := m.links[l.Index]
		m.setLocked(l)
		switch {
		case !ok:
			ev = LinkEvent{Type: LinkAdded, Link: l}
		case old != l:
			ev = LinkEvent{Type: LinkChanged, Link: l}
		}
	case unix.RTM_DELLINK:
		if old, ok := m.links[l.Index]; ok {
			if l.Name == "" {
				l.Name = old.Name
			}
			if l.Kind == "" || l.Kind == "device" {
				l.Kind = old.Kind
			}
		}
		m.deleteLocked(l.Index)
		ev = LinkEvent{Type: LinkDeleted, Link: l}
	}
	m.mu.Unlock()
	if ev.Type != 0 {
		m.deliver([]LinkEvent{ev})
	}
}

func (m *linkTable) deliver(evs []LinkEvent) {
	if len(evs) == 0 {
		return
	}
	if m.internal != nil {
		for _, ev := range evs {
			m.internal(ev)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for s := range m.subs {
		s.push(evs)
	}
}

// setLocked records l, renamed or new. m.mu must be held.
func (m *linkTable) setLocked(l Link) {
	if old, ok := m.links[l.Index]; ok && old.Name != l.Name && m.byName[old.Name] == l.Index {
		delete(m.byName, old.Name)
	}
	m.links[l.Index] = l
	m.byName[l.Name] = l.Index
}

// deleteLocked forgets link idx. m.mu must be held.
func (m *linkTable) deleteLocked(idx int) {
	if old, ok := m.links[idx]; ok && m.byName[old.Name] == idx {
		delete(m.byName, old.Name)
	}
	delete(m.links, idx)
}

// linkByName returns the link table's view of the link named name.
func (m *linkTable) linkByName(name string) (Link, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	idx, ok := m.byName[name]
	if !ok {
		return Link{}, false
	}
	return m.links[idx], true
}

// link returns the link table's view of link idx.
func (m *linkTable) link(idx int) (Link, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	l, ok := m.links[idx]
	return l, ok
}

// linkExists tells whether the link table has synced (known) and, if so,
// whether link idx exists.
func (m *linkTable) linkExists(idx int) (known, exists bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.links[idx]
	return m.synced, ok
}

func (m *linkTable) list() []Link {
	m.mu.Lock()
	out := make([]Link, 0, len(m.links))
	for _, l := range m.links {
		out = append(out, l)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b Link) int { return a.Index - b.Index })
	return out
}

func (m *linkTable) subscribe(wg *sync.WaitGroup) (<-chan LinkEvent, func()) {
	s := &subscriber{
		wake: make(chan struct{}, 1),
		out:  make(chan LinkEvent, 64),
		done: make(chan struct{}),
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		close(s.out)
		return s.out, func() {}
	}
	m.subs[s] = struct{}{}
	wg.Add(1)
	m.mu.Unlock()
	go func() {
		defer wg.Done()
		s.pump()
	}()
	cancel := func() {
		m.mu.Lock()
		delete(m.subs, s)
		m.mu.Unlock()
		s.stop()
	}
	return s.out, cancel
}

// closeSubscribers ends every subscription (their channels are closed).
func (m *linkTable) closeSubscribers() {
	m.mu.Lock()
	m.closed = true
	subs := m.subs
	m.subs = map[*subscriber]struct{}{}
	m.mu.Unlock()
	for s := range subs {
		s.stop()
	}
}

// subscriber is one Subscribe call: an unbounded queue between the link table
// (which appends and never waits) and the subscriber's channel (fed by the
// subscriber's own pump goroutine).
type subscriber struct {
	mu   sync.Mutex
	q    []LinkEvent
	wake chan struct{}
	out  chan LinkEvent
	done chan struct{}
	once sync.Once
}

func (s *subscriber) push(evs []LinkEvent) {
	s.mu.Lock()
	s.q = append(s.q, evs...)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *subscriber) stop() { s.once.Do(func() { close(s.done) }) }

func (s *subscriber) pump() {
	defer close(s.out)
	for {
		select {
		case <-s.done:
			return
		case <-s.wake:
		}
		for {
			s.mu.Lock()
			batch := s.q
			s.q = nil
			s.mu.Unlock()
			if len(batch) == 0 {
				break
			}
			for _, ev := range batch {
				select {
				case s.out <- ev:
				case <-s.done:
					return
				}
			}
		}
	}
}

// runSubscription keeps one kernel subscription alive until ctx ends. It
// subscribes, calls resync (first is true until a resync succeeded once),
// hands every update to handle, and when the subscription ends for any other
// reason than ctx (socket overrun, read error) calls onResub and starts over,
// so that a lost subscription costs a re-sync, never a missed change. A
// resync that fails starts over too, after a pause.
func runSubscription[T any](ctx context.Context, name string, log *slog.Logger, buf int,
	subscribe func(ch chan T, done chan struct{}, cb func(error)) error,
	resync func(first bool) bool, handle func(T), onResub func()) {
	pause := backoff.New(10*time.Millisecond, time.Second)
	first := true
	for ctx.Err() == nil {
		ch := make(chan T, buf)
		done := make(chan struct{})
		var once sync.Once
		closeDone := func() { once.Do(func() { close(done) }) }
		stop := context.AfterFunc(ctx, closeDone)
		err := subscribe(ch, done, func(err error) {
			if ctx.Err() == nil && !errors.Is(err, netlink.ErrDumpInterrupted) {
				log.Debug("netlink subscription error", "subscription", name, "error", err)
			}
		})
		if err != nil {
			stop()
			closeDone()
			log.Warn("netlink subscribe failed, retrying", "subscription", name, "error", err)
			if !pause.Wait(ctx) {
				return
			}
			continue
		}
		if !resync(first) {
			stop()
			closeDone()
			for range ch { // the reader ends with its socket
			}
			if !pause.Wait(ctx) {
				return
			}
			continue
		}
		pause.Reset()
		first = false
		for u := range ch {
			handle(u)
		}
		stop()
		closeDone()
		if ctx.Err() != nil {
			return
		}
		onResub()
		log.Info("netlink subscription lost, re-subscribing and re-syncing", "subscription", name)
	}
}
