package dataplane

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"
	"time"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// The kernel announces an interface's addresses itself when the interface's
// MAC is set (NETDEV_CHANGEADDR), even to the value it already has: a
// gratuitous ARP request for each IPv4 address when arp_notify is on, an
// unsolicited neighbour advertisement (override flag) for each IPv6 address
// when ndisc_notify is on. Setting a MAC needs CAP_NET_ADMIN only, where
// sending the frames from a packet socket needed CAP_NET_RAW.
//
// The same event makes the kernel flush the interface's neighbour entries,
// permanent ones included (neigh_changeaddr): the Dataplane puts the
// permanent ones back right after each announcement, and dynamic ones are
// resolved again by the next packet that needs them.

// announceSysctls are the interface keys under which the kernel announces
// the addresses of iface when its MAC is set.
func announceSysctls(iface string) []sysctl {
	return []sysctl{
		{"net.ipv4.conf." + iface + ".arp_notify", "1"},
		{"net.ipv6.conf." + iface + ".ndisc_notify", "1"},
	}
}

// ownBridgeSysctls are every key the Dataplane sets on its bridge.
func ownBridgeSysctls(name string) []sysctl {
	return append(bridgeSysctls(name), announceSysctls(name)...)
}

// announcer runs the announcement rounds. A trigger starts (or restarts) a
// burst of count rounds, interval apart; triggers that come close together
// coalesce, and a storm of them costs at most one round per gap.
//
// A round floods the announcements to every port of the bridge and flushes
// its neighbour entries (each resolved again by a flooded request when a
// packet needs it), so its cost grows with the ports. The gap grows with
// them too (announceGap): a node that fills with targets, one join after
// the other, spends the same share of its time on announcements at 1,000
// ports as at 100, instead of ten times as much.
type announcer struct {
	count    int
	interval time.Duration
	minGap   time.Duration
	clock    clock.Clock
	trigger  chan struct{}
	// round announces everything the bridge holds; it reports whether it
	// did (the neighbour flush came with it) and how many ports the bridge
	// has.
	round func() (announced bool, ports int)
}

// announceMinGap is the shortest time between two rounds: each one flushes
// the bridge's neighbour entries, so a burst of port joins must not turn
// into a flush per join. announceGapPerPort and announceMaxGap scale it
// with the bridge's ports, up to a bound that keeps a join announced
// within 2 s.
const (
	announceMinGap     = 100 * time.Millisecond
	announceGapPerPort = time.Millisecond
	announceMaxGap     = 2 * time.Second
)

// announceGap is the gap after a round on a bridge of ports ports.
func (a *announcer) announceGap(ports int) time.Duration {
	return min(max(a.minGap, time.Duration(ports)*announceGapPerPort), max(a.minGap, announceMaxGap))
}

func newAnnouncer(count int, interval time.Duration, c clock.Clock, round func() (bool, int)) *announcer {
	return &announcer{count: count, interval: interval, minGap: min(announceMinGap, interval), clock: c,
		trigger: make(chan struct{}, 1), round: round}
}

// kick asks for a burst; it never blocks.
func (a *announcer) kick() {
	if a.count <= 0 {
		return
	}
	select {
	case a.trigger <- struct{}{}:
	default:
	}
}

func (a *announcer) run(ctx context.Context) {
	if a.count <= 0 {
		return
	}
	var (
		timer     clock.Timer
		remaining int
		next      time.Time // no round before it
	)
	wait := func(d time.Duration) {
		if timer != nil {
			timer.Stop()
		}
		timer = a.clock.NewTimer(d)
	}
	fire := func() {
		if announced, ports := a.round(); announced {
			next = a.clock.Now().Add(a.announceGap(ports))
		}
		remaining--
		if remaining > 0 {
			wait(max(a.interval, next.Sub(a.clock.Now())))
		}
	}
	for {
		var due <-chan time.Time
		if timer != nil {
			due = timer.C()
		}
		select {
		case <-ctx.Done():
			if timer != nil {
				timer.Stop()
			}
			return
		case <-a.trigger:
			remaining = a.count
			if early := next.Sub(a.clock.Now()); early > 0 {
				wait(early)
			} else {
				fire()
			}
		case <-due:
			timer = nil
			if remaining > 0 {
				fire()
			}
		}
	}
}

// announceRound has the kernel announce the bridge's addresses of the
// families whose notify sysctl is on, by setting the bridge's MAC to its
// own value, and restores the permanent neighbour entries that the kernel
// flushes with it. It returns whether it set the MAC, and the bridge's
// number of ports.
func (dp *Dataplane) announceRound() (bool, int) {
	dp.mu.Lock()
	defer dp.mu.Unlock()
	ports := dp.m.ports.len()
	return dp.announceLocked(), ports
}

func (dp *Dataplane) announceLocked() bool {
	if dp.closed || dp.m.bridgeIndex == 0 || len(dp.bridgeMAC) != 6 {
		return false
	}
	n := dp.announcedAddrsLocked()
	if n == 0 {
		return false // nothing the kernel would announce: spare the flush
	}
	kept, err := permanentNeighbors(dp.h, dp.m.bridgeIndex)
	dp.read()
	if err != nil {
		// Announcing would lose them for good: skip this round.
		dp.log.Warn("announce: list the bridge's permanent neighbours", "error", err)
		return false
	}
	if err := dp.h.LinkSetHardwareAddr(dp.bridgeLink(), dp.bridgeMAC); err != nil {
		dp.log.Warn("announce: set the bridge's MAC", "mac", dp.bridgeMAC.String(), "error", err)
		return false
	}
	dp.ctr.announcements.Add(uint64(n))
	dp.ctr.neighRestored.Add(uint64(restoreNeighbors(dp.h, kept, dp.log)))
	return true
}

// announcedAddrsLocked counts the bridge's addresses that the kernel
// announces (its families' notify sysctl is on).
func (dp *Dataplane) announcedAddrsLocked() int {
	on := map[string]string{}
	readSysctls(dp.ns, dp.opts.BridgeName, dp.opts.SysctlFamilies.filter(announceSysctls(dp.opts.BridgeName)), on)
	v4 := on["net.ipv4.conf."+dp.opts.BridgeName+".arp_notify"] == "1"
	v6 := on["net.ipv6.conf."+dp.opts.BridgeName+".ndisc_notify"] == "1"
	n := 0
	for p := range dp.m.addrs {
		if (p.Addr().Is4() && v4) || (p.Addr().Is6() && v6) {
			n++
		}
	}
	return n
}

// permanentNeighbors lists the permanent neighbour entries of link index.
func permanentNeighbors(h *netlink.Handle, index int) ([]netlink.Neigh, error) {
	all, err := h.NeighList(index, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	return slices.DeleteFunc(all, func(n netlink.Neigh) bool {
		return n.State&netlink.NUD_PERMANENT == 0 || n.IP == nil
	}), nil
}

// restoreNeighbors sets the entries back and returns how many it set.
func restoreNeighbors(h *netlink.Handle, neighs []netlink.Neigh, log *slog.Logger) int {
	n := 0
	for i := range neighs {
		nb := neighs[i]
		if err := h.NeighSet(&nb); err != nil {
			log.Warn("restore a permanent neighbour after an announcement", "addr", nb.IP.String(),
				"mac", nb.HardwareAddr.String(), "error", err)
			continue
		}
		n++
	}
	return n
}

// Announce has the kernel send one gratuitous ARP (IPv4) or unsolicited
// neighbour advertisement (IPv6) for every address of the interface ifname
// of the namespace ns (netns.None() or zero: the caller's), so that
// neighbours holding a stale entry for one of them update it at once. It
// turns on the interface's arp_notify / ndisc_notify for the families of
// addrs and sets the interface's MAC to its own value, which needs
// CAP_NET_ADMIN only; the kernel then also flushes the interface's own
// neighbour entries. addrs must be on the interface: those that are not are
// reported in the error (the others are announced all the same). It is for
// hosts attached to the bridge, such as targets that reuse released
// addresses; the Dataplane announces the bridge itself.
func Announce(ns netns.NsHandle, ifname string, addrs []netip.Addr) error {
	if ns <= 0 {
		var err error
		if ns, err = netns.Get(); err != nil {
			return fmt.Errorf("announce: current netns: %w", err)
		}
		defer ns.Close()
	}
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("announce: netlink handle: %w", err)
	}
	defer h.Close()
	link, err := h.LinkByName(ifname)
	if err != nil {
		return fmt.Errorf("announce: link %s: %w", ifname, err)
	}
	on, missing, err := addrsOn(h, link, addrs)
	if err != nil {
		return err
	}
	if len(on) > 0 {
		if _, err := setSysctls(ns, ifname, familiesOf(on).filter(announceSysctls(ifname))); err != nil {
			return fmt.Errorf("announce on %s: %w", ifname, err)
		}
		if err := h.LinkSetHardwareAddr(link, link.Attrs().HardwareAddr); err != nil {
			return fmt.Errorf("announce on %s: set its MAC %s: %w", ifname, link.Attrs().HardwareAddr, err)
		}
	}
	var errs []error
	for _, a := range missing {
		errs = append(errs, fmt.Errorf("announce %s: not an address of %s", a, ifname))
	}
	return errors.Join(errs...)
}

// addrsOn splits addrs into those on link and the others.
func addrsOn(h *netlink.Handle, link netlink.Link, addrs []netip.Addr) (on, missing []netip.Addr, _ error) {
	list, err := h.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, nil, fmt.Errorf("announce: addresses of %s: %w", link.Attrs().Name, err)
	}
	have := map[netip.Addr]bool{}
	for _, a := range list {
		if ip, ok := netip.AddrFromSlice(a.IP); ok {
			have[ip.Unmap()] = true
		}
	}
	for _, a := range addrs {
		if have[a.Unmap()] {
			on = append(on, a.Unmap())
		} else {
			missing = append(missing, a)
		}
	}
	return on, missing, nil
}

// familiesOf returns the families of addrs.
func familiesOf(addrs []netip.Addr) SysctlFamilies {
	var f SysctlFamilies
	for _, a := range addrs {
		if a.Is4() {
			f |= SysctlsIPv4
		} else {
			f |= SysctlsIPv6
		}
	}
	return f
}
