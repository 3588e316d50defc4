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
// never removed them); the bridge is refused.
func (dp *Dataplane) RemoveLink(index int, name string) (bool, error) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	if dp.closed {
		return false, ErrClosed
	}
	if index == dp.m.bridgeIndex {
		return false, fmt.Errorf("link %d (%s) is the bridge", index, name)
	}
	dp.read()
	l, err := dp.h.LinkByIndex(index)
	if linkGone(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("get link %d (%s): %w", index, name, err)
	}
	if l.Attrs().Name != name {
		return false, nil
	}
	err = dp.write(opLinkDel, name, func() error { return dp.h.LinkDel(l) })
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
