package dataplane

import (
	"bytes"
	"crypto/rand"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/setdiff"
)

// RandomMAC returns a random locally administered unicast MAC address.
func RandomMAC() net.HardwareAddr {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	b[0] = (b[0] | 0x02) &^ 0x01
	return b
}

func (dp *Dataplane) bridgeObject() string {
	return "bridge " + dp.opts.BridgeName
}

func (dp *Dataplane) bridgeLink() netlink.Link {
	return &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Index: dp.m.bridgeIndex, Name: dp.opts.BridgeName}}
}

// ensureBridgeLocked makes the bridge exist and be up. It adopts an existing
// bridge of that name with its MAC, or creates one. When the bridge's index
// changed (it was deleted and re-created) the model of everything that
// lived on it is reset, so that the caller's converge re-creates it.
func (dp *Dataplane) ensureBridgeLocked() error {
	name := dp.opts.BridgeName
	dp.read()
	l, err := dp.h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if !errors.As(err, &nf) && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("look up %s: %w", dp.bridgeObject(), err)
		}
		l = nil
	}
	if l == nil {
		mac := dp.bridgeMAC
		if mac == nil {
			mac = dp.loadMAC()
		}
		if mac == nil {
			mac = RandomMAC()
		}
		br := &netlink.Bridge{LinkAttrs: netlink.LinkAttrs{Name: name, HardwareAddr: mac}}
		err := dp.write(opLinkAdd, fmt.Sprintf("%s (mac %s)", dp.bridgeObject(), mac), func() error { return dp.h.LinkAdd(br) })
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		dp.read()
		if l, err = dp.h.LinkByName(name); err != nil {
			return fmt.Errorf("look up %s after creating it: %w", dp.bridgeObject(), err)
		}
		dp.log.Info("created bridge", "index", l.Attrs().Index, "mac", l.Attrs().HardwareAddr.String())
	} else if l.Type() != "bridge" {
		return fmt.Errorf("%s: the link exists and is a %s, not a bridge", dp.bridgeObject(), l.Type())
	}
	a := l.Attrs()
	if a.Index != dp.m.bridgeIndex {
		if dp.m.bridgeIndex != 0 {
			dp.log.Warn("bridge was re-created; restoring its addresses, ports and routes",
				"oldIndex", dp.m.bridgeIndex, "index", a.Index)
			dp.m.addrs = map[netip.Prefix]struct{}{}
			var released []int
			for idx, ps := range dp.m.ports.all() {
				if !ps.absent {
					released = append(released, idx)
				}
			}
			dp.m.ports.removeAll(released) // they went with the old bridge
			// Routes over the old device went with it.
			dp.m.routes = [2]routeState{}
		}
		dp.m.bridgeIndex = a.Index
		dp.bridgeIdx.Store(int64(a.Index))
		if _, err := setSysctls(dp.ns, name, dp.opts.SysctlFamilies.filter(ownBridgeSysctls(name))); err != nil {
			if dp.started {
				dp.log.Error("bridge sysctls", "error", err)
			} else {
				dp.sysctlErrs = append(dp.sysctlErrs, err) // New reports them
			}
		}
	}
	if a.Flags&net.FlagUp == 0 {
		if err := dp.write(opLinkSetUp, dp.bridgeObject(), func() error { return dp.h.LinkSetUp(l) }); err != nil {
			return err
		}
	}
	if !bytes.Equal(a.HardwareAddr, dp.bridgeMAC) {
		if dp.bridgeMAC != nil {
			dp.log.Warn("bridge MAC changed", "old", dp.bridgeMAC.String(), "new", a.HardwareAddr.String())
		}
		dp.bridgeMAC = slices.Clone(a.HardwareAddr)
		dp.saveMAC(dp.bridgeMAC)
		dp.ann.kick()
	}
	return nil
}

func (dp *Dataplane) loadMAC() net.HardwareAddr {
	if dp.opts.MACFile == "" {
		return nil
	}
	b, err := os.ReadFile(dp.opts.MACFile)
	if err != nil {
		if !errors.Is(err, os.ErrNotExist) {
			dp.log.Warn("read MAC file", "file", dp.opts.MACFile, "error", err)
		}
		return nil
	}
	mac, err := net.ParseMAC(strings.TrimSpace(string(b)))
	if err != nil || len(mac) != 6 || mac[0]&1 != 0 {
		dp.log.Warn("MAC file holds no unicast Ethernet MAC; using a random one", "file", dp.opts.MACFile, "content", string(b))
		return nil
	}
	return mac
}

func (dp *Dataplane) saveMAC(mac net.HardwareAddr) {
	if dp.opts.MACFile == "" {
		return
	}
	if cur := dp.loadMACQuiet(); bytes.Equal(cur, mac) {
		return
	}
	dir := filepath.Dir(dp.opts.MACFile)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		dp.log.Warn("write MAC file", "file", dp.opts.MACFile, "error", err)
		return
	}
	tmp, err := os.CreateTemp(dir, ".bridge-mac-*")
	if err == nil {
		_, err = tmp.WriteString(mac.String() + "\n")
		if cerr := tmp.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp.Name(), dp.opts.MACFile)
		}
		if err != nil {
			_ = os.Remove(tmp.Name())
		}
	}
	if err != nil {
		dp.log.Warn("write MAC file", "file", dp.opts.MACFile, "error", err)
	}
}

func (dp *Dataplane) loadMACQuiet() net.HardwareAddr {
	b, err := os.ReadFile(dp.opts.MACFile)
	if err != nil {
		return nil
	}
	mac, _ := net.ParseMAC(strings.TrimSpace(string(b)))
	return mac
}

// ---- addresses ----

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

func ipNetToPrefix(n *net.IPNet) (netip.Prefix, bool) {
	if n == nil {
		return netip.Prefix{}, false
	}
	a, ok := netip.AddrFromSlice(n.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	ones, bits := n.Mask.Size()
	if bits == 0 {
		ones = 0
	}
	return netip.PrefixFrom(a, ones), true
}

func managedAddr(p netip.Prefix) bool {
	return !(p.Addr().Is6() && p.Addr().IsLinkLocalUnicast())
}

// loadAddrsLocked reads the bridge's addresses into the model.
func (dp *Dataplane) loadAddrsLocked() error {
	dp.read()
	addrs, err := dp.h.AddrList(dp.bridgeLink(), netlink.FAMILY_ALL)
	if err != nil {
		return fmt.Errorf("list addresses of %s: %w", dp.bridgeObject(), err)
	}
	set := map[netip.Prefix]struct{}{}
	for _, a := range addrs {
		if p, ok := ipNetToPrefix(a.IPNet); ok && managedAddr(p) {
			set[p] = struct{}{}
		}
	}
	dp.m.addrs = set
	return nil
}

// applyAddrsLocked adds the missing addresses, then removes the unwanted
// ones (add first: with promote_secondaries a same-subnet change never
// leaves the bridge without an address).
func (dp *Dataplane) applyAddrsLocked(target map[netip.Prefix]struct{}) error {
	var errs []error
	added := false
	add, del := setdiff.Sorted(sortedPrefixes(target), sortedPrefixes(dp.m.addrs), netip.Prefix.Compare)
	for _, p := range add {
		a := &netlink.Addr{IPNet: prefixToIPNet(p)}
		if p.Addr().Is6() {
			a.Flags = unix.IFA_F_NODAD
		}
		err := dp.write(opAddrAdd, fmt.Sprintf("%s dev %s", p, dp.opts.BridgeName), func() error { return dp.h.AddrAdd(dp.bridgeLink(), a) })
		if err != nil && !errors.Is(err, unix.EEXIST) {
			errs = append(errs, err)
			continue
		}
		dp.m.addrs[p] = struct{}{}
		added = true
	}
	for _, p := range del {
		a := &netlink.Addr{IPNet: prefixToIPNet(p)}
		err := dp.write(opAddrDel, fmt.Sprintf("%s dev %s", p, dp.opts.BridgeName), func() error { return dp.h.AddrDel(dp.bridgeLink(), a) })
		if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENOENT) {
			errs = append(errs, err)
			continue
		}
		delete(dp.m.addrs, p)
	}
	if added {
		dp.ann.kick()
	}
	return errors.Join(errs...)
}

// sortedPrefixes is the set s as a sorted list (a bridge has a few
// addresses: sorting them costs nothing).
func sortedPrefixes(s map[netip.Prefix]struct{}) []netip.Prefix {
	return slices.SortedFunc(maps.Keys(s), netip.Prefix.Compare)
}

// ---- ports ----

func (dp *Dataplane) portObject(idx int) string {
	if l, ok := dp.linkTable.link(idx); ok {
		return fmt.Sprintf("port %d (%s)", idx, l.Name)
	}
	return fmt.Sprintf("port %d", idx)
}

// loadPortsLocked reads which links exist and which are enslaved to the
// bridge (one link dump: the periodic re-sync and lost subscriptions only).
// With adopt, links enslaved to the bridge become owned ports (the first
// Apply releases those not wanted).
func (dp *Dataplane) loadPortsLocked(adopt bool) error {
	dp.read()
	links, err := dp.h.LinkList()
	if err != nil {
		return fmt.Errorf("list links: %w", err)
	}
	byIndex := make(map[int]netlink.Link, len(links))
	for _, l := range links {
		a := l.Attrs()
		byIndex[a.Index] = l
		if adopt && a.MasterIndex == dp.m.bridgeIndex && dp.m.bridgeIndex != 0 && !dp.m.ports.has(a.Index) {
			dp.m.ports.set(a.Index, &portState{enslaved: true, mtu: a.MTU})
		}
	}
	for _, idx := range slices.Clone(dp.m.ports.keys) {
		l, ok := byIndex[idx]
		dp.settlePortLocked(idx, l, ok)
	}
	return nil
}

// refreshPortLocked reads one port back from the kernel (a link
// notification disagreed with the model: the link table's view may only lag
// behind a write of ours), instead of listing every link.
func (dp *Dataplane) refreshPortLocked(idx int) {
	dp.read()
	l, err := dp.h.LinkByIndex(idx)
	dp.settlePortLocked(idx, l, err == nil)
}

// settlePortLocked updates the model of port idx from the kernel's link l
// (exists false: there is none). A port that exists and is not enslaved to
// the bridge leaves the model, so that the next convergence enslaves it
// again if it is wanted.
func (dp *Dataplane) settlePortLocked(idx int, l netlink.Link, exists bool) {
	ps, ok := dp.m.ports.get(idx)
	if !ok {
		return
	}
	switch {
	case !exists:
		ps.markAbsent()
	case l.Attrs().MasterIndex == dp.m.bridgeIndex:
		ps.absent, ps.enslaved, ps.mtu = false, true, l.Attrs().MTU
	default:
		dp.m.ports.remove(idx)
	}
}

// applyPortsLocked releases the ports no longer wanted and enslaves the
// wanted ones that are not yet (the link of a port known to be absent is
// left alone until the link table sees it). It returns the ports it enslaved
// and whether one left the bridge.
func (dp *Dataplane) applyPortsLocked(target []int) (joined []int, left bool, _ error) {
	add, del := dp.m.ports.diff(target)
	var errs []error
	gone := del[:0]
	for _, idx := range del {
		ps, _ := dp.m.ports.get(idx)
		if ps.enslaved && !ps.absent {
			if l, ok := dp.linkTable.link(idx); ok && l.MasterIndex != 0 && l.MasterIndex != dp.m.bridgeIndex {
				// Someone moved it to another master: not ours to release.
				gone = append(gone, idx)
				continue
			}
			link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}
			err := dp.write(opLinkSetNoMaster, dp.portObject(idx), func() error { return dp.h.LinkSetNoMaster(link) })
			if err != nil && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, err)
				continue
			}
			left = true
		}
		gone = append(gone, idx)
	}
	dp.m.ports.removeAll(gone)
	settled := add[:0]
	var states []*portState
	for _, idx := range add {
		ps, err := dp.enslaveLocked(idx)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		settled, states = append(settled, idx), append(states, ps)
		if ps.enslaved {
			joined = append(joined, idx)
		}
	}
	dp.m.ports.merge(settled, states)
	if len(joined) > 0 {
		// The far end of a new port may hold the bridge's address with
		// an old MAC (a target whose connection healed onto a new proxy
		// pod, Meridio #466). A port that leaves needs no announcement.
		dp.ann.kick()
	}
	return joined, left, errors.Join(errs...)
}

// enslaveLocked enslaves link idx to the bridge and returns its settled
// state: enslaved, or absent when the link does not exist (the link
// table tells when it appears, so the next Apply does not retry).
func (dp *Dataplane) enslaveLocked(idx int) (*portState, error) {
	if idx == dp.m.bridgeIndex {
		return nil, &OpError{Op: opLinkSetMaster.String(), Object: dp.portObject(idx), Err: errors.New("the bridge cannot be its own port")}
	}
	// No shortcut through the link table: a link just created may not
	// be in its view yet.
	link := &netlink.Device{LinkAttrs: netlink.LinkAttrs{Index: idx}}
	err := dp.write(opLinkSetMaster, dp.portObject(idx), func() error { return dp.h.LinkSetMasterByIndex(link, dp.m.bridgeIndex) })
	switch {
	case err == nil:
		return &portState{enslaved: true}, nil
	case errors.Is(err, unix.ENODEV):
		dp.log.Debug("port does not exist; skipped", "port", idx)
		return &portState{absent: true}, nil
	default:
		return nil, err
	}
}

// syncMTULocked makes the bridge's MTU the minimum of its ports' MTUs. The
// kernel does so by itself unless the bridge's MTU was ever set by hand, so
// in the usual case this writes nothing. With full it walks every port (a
// port left or changed its MTU) and reads the bridge; otherwise only the
// joined ports can lower the minimum, and the bridge is read only when one
// of them is below its last known MTU.
func (dp *Dataplane) syncMTULocked(joined []int, full bool) error {
	if dp.m.bridgeIndex == 0 {
		return nil
	}
	ports := joined
	if full {
		ports = dp.m.ports.keys
	}
	minMTU := 0
	for _, idx := range ports {
		ps, ok := dp.m.ports.get(idx)
		if !ok || !ps.enslaved || ps.absent {
			continue
		}
		if ps.mtu == 0 || full {
			ps.mtu = dp.portMTULocked(idx)
		}
		if ps.mtu > 0 && (minMTU == 0 || ps.mtu < minMTU) {
			minMTU = ps.mtu
		}
	}
	if minMTU == 0 || (!full && dp.m.bridgeMTU != 0 && minMTU >= dp.m.bridgeMTU) {
		return nil // the joined ports do not lower the MTU: nothing to read
	}
	dp.read()
	br, err := dp.h.LinkByIndex(dp.m.bridgeIndex)
	if err != nil {
		return fmt.Errorf("read %s: %w", dp.bridgeObject(), err)
	}
	dp.m.bridgeMTU = br.Attrs().MTU
	if dp.m.bridgeMTU == minMTU || (!full && dp.m.bridgeMTU < minMTU) {
		return nil
	}
	err = dp.write(opLinkSetMTU, fmt.Sprintf("%s mtu %d", dp.bridgeObject(), minMTU), func() error { return dp.h.LinkSetMTU(br, minMTU) })
	if err == nil {
		dp.m.bridgeMTU = minMTU
	}
	return err
}

// portMTULocked is the MTU of port idx: the link table's, or read (0 when the
// link cannot be read).
func (dp *Dataplane) portMTULocked(idx int) int {
	if l, ok := dp.linkTable.link(idx); ok {
		return l.MTU
	}
	dp.read()
	nl, err := dp.h.LinkByIndex(idx)
	if err != nil {
		return 0
	}
	return nl.Attrs().MTU
}
