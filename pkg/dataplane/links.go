package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// removeLinksLocked deletes the links of State.Remove that goal does not
// have as ports (nor is the bridge), logging what it did, and returns what
// failed. dp.mu must be held.
func (dp *Dataplane) removeLinksLocked(links []LinkRef, goal *spec) error {
	var errs []error
	for _, l := range links {
		if goal.hasPort(l.Index) || l.Index == dp.m.bridgeIndex {
			continue // a port now, or the bridge: not the link that was meant
		}
		removed, err := dp.removeLinkLocked(l)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("remove link %d (%s): %w", l.Index, l.Name, err))
		case removed:
			dp.log.Info("link removed", "index", l.Index, "name", l.Name)
		}
	}
	return errors.Join(errs...)
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
	err = dp.write(opLinkDel, l.Name, func() error { return delLink(dp.h, link) })
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
