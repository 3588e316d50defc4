package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// RemoveLink deletes the link index of the namespace if it still exists
// under name, and reports whether it did: a link that is gone, or whose
// index now names another link, is left alone. It is for the links that
// the owner of a closed connection knows are left over (their forwarder
// never removed them) and must know gone before it hands the connection's
// addresses back; the bridge is refused.
func (dp *Dataplane) RemoveLink(index int, name string) (bool, error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return false, ErrClosed
	}
	return dp.removeLinkLocked(LinkRef{Index: index, Name: name})
}

// retireLinksLocked deletes the links of State.Retired that goal does not
// have as ports, logging what it did.
func (dp *Dataplane) retireLinksLocked(retired []LinkRef, goal *spec) {
	for _, l := range retired {
		if goal.hasPort(l.Index) {
			continue // another connection's port now
		}
		removed, err := dp.removeLinkLocked(l)
		switch {
		case err != nil:
			dp.log.Warn("link a connection had before its heal not removed", "index", l.Index, "name", l.Name, "error", err)
		case removed:
			dp.log.Info("link a connection had before its heal removed", "index", l.Index, "name", l.Name)
		}
	}
}

// removeLinkLocked deletes link l if its index still names it.
func (dp *Dataplane) removeLinkLocked(l LinkRef) (bool, error) {
	if l.Index == dp.m.bridgeIndex {
		return false, fmt.Errorf("link %d (%s) is the bridge", l.Index, l.Name)
	}
	dp.read()
	link, err := dp.h.LinkByIndex(l.Index)
	if linkGone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get link %d (%s): %w", l.Index, l.Name, err)
	}
	if link.Attrs().Name != l.Name {
		return false, nil
	}
	err = dp.write(opLinkDel, l.Name, func() error { return dp.h.LinkDel(link) })
	if linkGone(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, nil
}

// linkGone reports whether err says the link does not exist (any more).
func linkGone(err error) bool {
	var nf netlink.LinkNotFoundError
	return errors.As(err, &nf) || errors.Is(err, unix.ENODEV)
}
