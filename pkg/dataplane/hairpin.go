package dataplane

import (
	"errors"
	"fmt"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// applyHairpinLocked makes the hairpin mode of the enslaved ports what goal
// says (on for goal.hairpin, off for the others the Dataplane turned on),
// in one merge of the sorted lists. A port that is not enslaved yet is
// skipped: the convergence that enslaves it sets it. Ports found on an
// adopted bridge keep their mode until goal names them.
func (dp *Dataplane) applyHairpinLocked(hairpin []int) error {
	var errs []error
	i := 0
	for idx, ps := range dp.m.ports.all() {
		for i < len(hairpin) && hairpin[i] < idx {
			i++
		}
		on := i < len(hairpin) && hairpin[i] == idx
		if !ps.enslaved || ps.absent || ps.hairpin == on {
			continue
		}
		if err := dp.setHairpinLocked(idx, on); err != nil {
			errs = append(errs, err)
			continue
		}
		ps.hairpin = on
	}
	return errors.Join(errs...)
}

// setHairpinLocked sets the hairpin mode of port idx. A port whose link is
// gone is left to the link matcher, which marks it absent.
func (dp *Dataplane) setHairpinLocked(idx int, on bool) error {
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}
	object := fmt.Sprintf("%s hairpin %t", dp.portObject(idx), on)
	err := dp.write(opLinkSetHairpin, object, func() error { return dp.h.LinkSetHairpin(link, on) })
	if errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}
