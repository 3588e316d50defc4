package conntrackflush

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/vishvananda/netns"
)

// Interface deletes conntrack entries of one namespace.
type Interface interface {
	// Flush deletes the entries with an original or reply source or
	// destination address inside one of ps, except those keep wants kept
	// (nil: none, read once the dump is done); it returns how many it
	// deleted.
	Flush(ps []netip.Prefix, keep func(*conntrack.Flow) bool) (int, error)
	// Close releases the connection; a later Flush dials again.
	Close()
}

// Flusher is the Interface of a namespace, on a conntrack connection it
// dials at its first flush and again after a delete failed (the socket may
// be broken). It is safe for concurrent use; flushes run one at a time.
type Flusher struct {
	ns   netns.NsHandle
	dial func(*netlink.Config) (*conntrack.Conn, error)

	mu   sync.Mutex
	conn *conntrack.Conn
}

// Option tunes a Flusher.
type Option func(*Flusher)

// WithDial replaces conntrack.Dial (a test's fails, or hands out a broken
// connection).
func WithDial(dial func(*netlink.Config) (*conntrack.Conn, error)) Option {
	return func(f *Flusher) { f.dial = dial }
}

// New returns the Flusher of namespace ns (the caller's own when ns is not
// open).
func New(ns netns.NsHandle, opts ...Option) *Flusher {
	f := &Flusher{ns: ns, dial: conntrack.Dial}
	for _, o := range opts {
		o(f)
	}
	return f
}

// Flush implements Interface: one dump (streamed, see dump.go), filtered
// in process against all of ps.
func (f *Flusher) Flush(ps []netip.Prefix, keep func(*conntrack.Flow) bool) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn == nil {
		conn, err := f.dial(&netlink.Config{NetNS: nsFD(f.ns)})
		if err != nil {
			return 0, fmt.Errorf("conntrack dial: %w", err)
		}
		f.conn = conn
	}
	m := newPrefixMatcher(ps)
	flows, err := dumpMatching(f.ns, entryFilter{addr: m.match})
	if err != nil {
		return 0, err
	}
	if keep != nil {
		flows = slices.DeleteFunc(flows, func(fl conntrack.Flow) bool { return keep(&fl) })
	}
	n, err := deleteFlows(f.conn, flows)
	if err != nil {
		// A delete failed: the socket may be broken; dial again next time.
		_ = f.conn.Close()
		f.conn = nil
	}
	return n, err
}

// Close implements Interface.
func (f *Flusher) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
}

// nsFD is ns as the NetNS of a mdlayher/netlink configuration, where 0 means
// the current namespace.
func nsFD(ns netns.NsHandle) int {
	if !ns.IsOpen() {
		return 0
	}
	return int(ns)
}
