package labrun

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// flowsPerCheck is how many flows a traffic check opens: with three targets
// the chance that one of them gets none is 3·(2/3)^32 < 10⁻⁵.
const flowsPerCheck = 32

// minRepliesPerLB is how many packets toward the external host each LB must
// forward during the traffic checks (the replies come back through the
// proxy, which spreads them over the LBs).
const minRepliesPerLB = 8

// hostVIPs are the VIPs that are single addresses (the targets answer on
// those).
func (l *Lab) hostVIPs() []netip.Addr {
	var out []netip.Addr
	for _, v := range l.VIPs() {
		if v.IsSingleIP() {
			out = append(out, v.Addr())
		}
	}
	return out
}

func (l *Lab) extAddr(family netip.Addr) netip.Addr {
	if family.Is4() {
		return extV4
	}
	return extV6
}

// Check runs the lab's checks once: every component the run expects runs
// (all but those stopped on request), every target got addresses and
// gateways, the bridge has a port per LB and target, the proxy routes the
// VIPs over every LB, each target reaches the bridge addresses, the external
// host reaches the VIPs over TCP and UDP with every target answering, and
// the replies return through the proxy over every LB; and with services, a
// target reaches the service IPs, balanced over the targets, with ClientIP
// affinity on the sticky ones. The error is for a
// lab that cannot be inspected at all.
func (l *Lab) Check(ctx context.Context) (Report, error) {
	var r Report
	if err := l.refresh(); err != nil {
		return r, err
	}
	if !exists(l.NetNSPath("proxy")) {
		return r, fmt.Errorf("lab %s: the proxy namespace does not exist", l.ID())
	}
	states := l.ComponentStates()
	l.componentsRow(&r, states)
	lbs, targets := l.expected(states)
	vips := l.hostVIPs()
	bridgeAddrs, _ := linkPrefixes(l.NetNSPath("proxy"), bridgeIf)

	// Targets: addresses and gateways.
	pubs, _ := targetaddrs.Read(l.TargetsDir())
	for _, t := range targets {
		ok, detail := l.checkTarget(t, pubs[t], bridgeAddrs, vips)
		r.add("target "+t+" addresses and gateways", ok, "%s", detail)
	}

	// Bridge ports.
	ports, err := bridgePorts(l.NetNSPath("proxy"))
	want := len(lbs) + len(targets)
	r.add("proxy bridge ports", err == nil && len(ports) == want, "%d of %d (%d LBs, %d targets): %s%s",
		len(ports), want, len(lbs), len(targets), strings.Join(ports, " "), errDetail(err))

	// Proxy routes and rules.
	ok, detail := l.checkProxyRoutes(len(lbs), bridgeAddrs, vips)
	r.add("proxy ECMP routes and VIP rules", ok, "%s", detail)

	// Ping the bridge from each target.
	for _, t := range targets {
		var failed []string
		for _, b := range bridgeAddrs {
			if _, err := l.Exec(t, "ping", "-c1", "-W2", b.Addr().String()); err != nil {
				failed = append(failed, b.Addr().String())
			}
		}
		detail := fmt.Sprintf("%v answer", prefixAddrs(bridgeAddrs))
		if len(failed) > 0 {
			detail = fmt.Sprintf("no answer from %v", failed)
		}
		r.add("target "+t+" pings the bridge", len(bridgeAddrs) > 0 && len(failed) == 0, "%s", detail)
	}

	// Traffic from the external host, and the LBs the replies return over.
	before := l.lbTxPackets(lbs)
	for _, vip := range vips {
		for _, network := range []string{"tcp", "udp"} {
			if ctx.Err() != nil {
				return r, ctx.Err()
			}
			res := l.flows(network, l.extAddr(vip), vip, l.EchoPort(), flowsPerCheck)
			missing := []string{}
			for _, t := range targets {
				if res.answers[t] == 0 {
					missing = append(missing, t)
				}
			}
			ok := res.failed == 0 && len(missing) == 0 && len(targets) > 0
			detail := res.String()
			if len(missing) > 0 {
				detail += fmt.Sprintf("; no flow to %v", missing)
			}
			r.add(fmt.Sprintf("ext -> %s %s:%d", strings.ToUpper(network), vip, l.EchoPort()), ok, "%s", detail)
		}
	}
	after := l.lbTxPackets(lbs)
	var parts []string
	okLB := len(lbs) > 0 && len(vips) > 0
	for _, n := range lbs {
		d := after[n] - before[n]
		if d < minRepliesPerLB || after[n] == 0 {
			okLB = false
		}
		parts = append(parts, fmt.Sprintf("%s=%d", n, d))
	}
	r.add("replies return through the proxy over every LB", okLB,
		"packets each LB forwarded to the external host during the traffic checks: %s (want >= %d each)",
		strings.Join(parts, " "), minRepliesPerLB)
	l.checkServices(ctx, &r, targets)
	return r, nil
}

func errDetail(err error) string {
	if err != nil {
		return " (" + err.Error() + ")"
	}
	return ""
}

func prefixAddrs(ps []netip.Prefix) []string {
	var out []string
	for _, p := range ps {
		out = append(out, p.Addr().String())
	}
	return out
}

// checkTarget: the target published an address of each family of the
// bridge, carries it on its NSM interface, and routes each VIP's replies via
// the bridge address of the VIP's family.
func (l *Lab) checkTarget(name string, published []netip.Addr, bridge []netip.Prefix, vips []netip.Addr) (bool, string) {
	if len(bridge) == 0 {
		return false, "the proxy's bridge has no address yet"
	}
	onIf, err := linkPrefixes(l.NetNSPath(name), nsmIf)
	if err != nil {
		return false, fmt.Sprintf("no NSM interface %s: %v", nsmIf, err)
	}
	var addrs []string
	for _, b := range bridge {
		i := slices.IndexFunc(published, func(a netip.Addr) bool { return b.Masked().Contains(a) })
		if i < 0 {
			return false, fmt.Sprintf("no published address in %s (published %v)", b.Masked(), published)
		}
		a := published[i]
		if !slices.ContainsFunc(onIf, func(p netip.Prefix) bool { return p.Addr() == a }) {
			return false, fmt.Sprintf("published %s is not on %s (%v)", a, nsmIf, onIf)
		}
		addrs = append(addrs, a.String())
	}
	var gws []string
	for _, vip := range vips {
		gw, err := l.gatewayFrom(name, vip)
		if err != nil {
			return false, fmt.Sprintf("addresses %v; no route from %s: %v", addrs, vip, err)
		}
		if !slices.ContainsFunc(bridge, func(b netip.Prefix) bool { return b.Addr() == gw }) {
			return false, fmt.Sprintf("addresses %v; replies from %s go via %s, not a bridge address %v", addrs, vip, gw, prefixAddrs(bridge))
		}
		gws = append(gws, fmt.Sprintf("%s via %s", vip, gw))
	}
	return true, fmt.Sprintf("addresses %v; gateways %v", addrs, gws)
}

// gatewayFrom is the gateway the target uses toward the external host for
// traffic from vip.
func (l *Lab) gatewayFrom(target string, vip netip.Addr) (netip.Addr, error) {
	var gw netip.Addr
	err := netnsdo.WithNetlink(l.NetNSPath(target), func(h *netlink.Handle) error {
		routes, err := h.RouteGetWithOptions(net.IP(l.extAddr(vip).AsSlice()), &netlink.RouteGetOptions{SrcAddr: vip.AsSlice()})
		if err != nil {
			return err
		}
		if len(routes) == 0 || routes[0].Gw == nil {
			return fmt.Errorf("no gateway")
		}
		gw, _ = netip.AddrFromSlice(routes[0].Gw)
		gw = gw.Unmap()
		return nil
	})
	return gw, err
}

// bridgePorts are the names of the ports of the proxy's bridge.
func bridgePorts(proxyNS string) ([]string, error) {
	var out []string
	err := netnsdo.WithNetlink(proxyNS, func(h *netlink.Handle) error {
		br, err := h.LinkByName(bridgeIf)
		if err != nil {
			return err
		}
		links, err := h.LinkList()
		if err != nil {
			return err
		}
		for _, k := range links {
			if k.Attrs().MasterIndex == br.Attrs().Index {
				out = append(out, k.Attrs().Name)
			}
		}
		return nil
	})
	slices.Sort(out)
	return out, err
}

// defaultNexthops are the gateways of the default route of the proxy's
// table for a family.
func defaultNexthops(h *netlink.Handle, family int) ([]netip.Addr, error) {
	routes, err := h.RouteListFiltered(family, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return nil, err
	}
	defaults := slices.DeleteFunc(routes, func(r netlink.Route) bool {
		if r.Dst == nil {
			return false
		}
		ones, _ := r.Dst.Mask.Size()
		return ones != 0
	})
	return topo.Gateways(defaults), nil
}

func (l *Lab) checkProxyRoutes(lbs int, bridge []netip.Prefix, vips []netip.Addr) (bool, string) {
	ok := true
	var parts []string
	err := netnsdo.WithNetlink(l.NetNSPath("proxy"), func(h *netlink.Handle) error {
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			if !slices.ContainsFunc(vips, func(v netip.Addr) bool { return v.Is4() == (fam == netlink.FAMILY_V4) }) {
				continue
			}
			nhs, err := defaultNexthops(h, fam)
			if err != nil {
				return err
			}
			inBridge := 0
			for _, nh := range nhs {
				if slices.ContainsFunc(bridge, func(b netip.Prefix) bool { return b.Masked().Contains(nh) }) {
					inBridge++
				}
			}
			if len(nhs) != lbs || inBridge != lbs {
				ok = false
			}
			parts = append(parts, fmt.Sprintf("table %d default via %v", table, nhs))
		}
		var missing []string
		for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
			rules, err := h.RuleList(fam)
			if err != nil {
				return err
			}
			for _, vip := range vips {
				if vip.Is4() != (fam == netlink.FAMILY_V4) {
					continue
				}
				if !slices.ContainsFunc(rules, func(r netlink.Rule) bool {
					if r.Src == nil || r.Table != table {
						return false
					}
					a, _ := netip.AddrFromSlice(r.Src.IP)
					ones, _ := r.Src.Mask.Size()
					return a.Unmap() == vip && ones == vip.BitLen()
				}) {
					missing = append(missing, vip.String())
				}
			}
		}
		if len(missing) > 0 {
			ok = false
			parts = append(parts, fmt.Sprintf("no rule from %v", missing))
		} else {
			parts = append(parts, fmt.Sprintf("rules from %d VIPs lookup %d", len(vips), table))
		}
		return nil
	})
	if err != nil {
		return false, err.Error()
	}
	return ok, fmt.Sprintf("%s (want %d LB nexthops per family)", strings.Join(parts, "; "), lbs)
}

// lbTxPackets reads how many packets each LB has sent toward the external
// host.
func (l *Lab) lbTxPackets(lbs []string) map[string]uint64 {
	out := map[string]uint64{}
	for _, n := range lbs {
		_ = netnsdo.WithNetlink(l.NetNSPath(n), func(h *netlink.Handle) error {
			link, err := h.LinkByName(lbExtIf)
			if err != nil {
				return err
			}
			if s := link.Attrs().Statistics; s != nil {
				out[n] = s.TxPackets
			}
			return nil
		})
	}
	return out
}
