package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"golang.org/x/sys/unix"
)

// conntrackConn is a lazily dialled conntrack connection in the namespace.
type conntrackConn struct {
	mu   sync.Mutex
	conn *conntrack.Conn
}

func (c *conntrackConn) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn != nil {
		_ = c.conn.Close()
		c.conn = nil
	}
}

// FlushConntrack deletes the conntrack entries that have addr as source or
// destination of their original or reply direction (a removed target, LB or
// VIP), so that a long-lived UDP flow does not keep going to a destination
// that is gone or was reused.
func (dp *Dataplane) FlushConntrack(addr netip.Addr) error {
	if !addr.IsValid() {
		return fmt.Errorf("flush conntrack: invalid address")
	}
	addr = addr.Unmap().WithZone("")
	_, err := dp.flushConntrack([]netip.Prefix{netip.PrefixFrom(addr, addr.BitLen())})
	return err
}

// FlushConntrackPrefix deletes the conntrack entries with an original or
// reply source or destination address inside p.
func (dp *Dataplane) FlushConntrackPrefix(p netip.Prefix) error {
	if !p.IsValid() {
		return fmt.Errorf("flush conntrack: invalid prefix")
	}
	p = netip.PrefixFrom(p.Addr().Unmap().WithZone(""), p.Bits()).Masked()
	_, err := dp.flushConntrack([]netip.Prefix{p})
	return err
}

// flushConntrack dumps the table once and deletes every entry matching one
// of ps; it returns how many it deleted.
func (dp *Dataplane) flushConntrack(ps []netip.Prefix) (int, error) {
	dp.mu.Lock()
	closed := dp.closed
	dp.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	c := &dp.ct
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.conn == nil {
		conn, err := conntrack.Dial(&netlink.Config{NetNS: int(dp.ns)})
		if err != nil {
			return 0, fmt.Errorf("conntrack dial: %w", err)
		}
		c.conn = conn
	}
	flows, err := c.conn.Dump(nil)
	if err != nil {
		// The socket may be broken; dial again next time.
		_ = c.conn.Close()
		c.conn = nil
		return 0, fmt.Errorf("conntrack dump: %w", err)
	}
	match := func(a netip.Addr) bool {
		a = a.Unmap()
		for _, p := range ps {
			if p.Contains(a) {
				return true
			}
		}
		return false
	}
	n, err := DeleteFlows(c.conn, flows, func(f *conntrack.Flow) bool {
		return match(f.TupleOrig.IP.SourceAddress) || match(f.TupleOrig.IP.DestinationAddress) ||
			match(f.TupleReply.IP.SourceAddress) || match(f.TupleReply.IP.DestinationAddress)
	})
	dp.ctr.ctDeleted.Add(uint64(n))
	return n, err
}

// DeleteFlows deletes, through conn, the flows of a dump that match; entries
// that expired meanwhile are not errors. It returns how many it deleted.
// The service load balancer shares it for its own flushes.
func DeleteFlows(conn *conntrack.Conn, flows []conntrack.Flow, match func(*conntrack.Flow) bool) (int, error) {
	var errs []error
	n := 0
	for i := range flows {
		f := &flows[i]
		if !match(f) {
			continue
		}
		del := conntrack.Flow{TupleOrig: f.TupleOrig, TupleReply: f.TupleReply, Zone: f.Zone}
		if err := conn.Delete(del); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // expired meanwhile
			}
			errs = append(errs, fmt.Errorf("conntrack delete %s: %w", f.TupleOrig, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
