package targetstub

import (
	"net/netip"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
)

// gateways returns, per family, the first address of the proxy's
// ExtraPrefixes (the bridge addresses, which are the targets' gateways).
func gateways(conn *networkservice.Connection) (v4, v6 netip.Addr) {
	for _, s := range conn.GetContext().GetIpContext().GetExtraPrefixes() {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		a := p.Addr()
		if a.Is4() && !v4.IsValid() {
			v4 = a
		}
		if a.Is6() && !v6.IsValid() {
			v6 = a
		}
	}
	return v4, v6
}

func hostPrefix(a netip.Addr) string { return netip.PrefixFrom(a, a.BitLen()).String() }

func defaultRoute(a netip.Addr) string {
	if a.Is4() {
		return "0.0.0.0/0"
	}
	return "::/0"
}

// withVIPs adds the VIPs to the connection's source addresses and one policy
// route per VIP: from the VIP, default via the gateway of its family. VIPs of
// a family without a gateway are carried without a policy. It reports
// whether anything changed.
func withVIPs(conn *networkservice.Connection, vips []netip.Addr) bool {
	if conn.GetContext() == nil {
		conn.Context = &networkservice.ConnectionContext{}
	}
	if conn.GetContext().GetIpContext() == nil {
		conn.Context.IpContext = &networkservice.IPContext{}
	}
	ipc := conn.GetContext().GetIpContext()
	v4, v6 := gateways(conn)
	changed := false
	have := map[string]bool{}
	for _, s := range ipc.GetSrcIpAddrs() {
		have[s] = true
	}
	for _, vip := range vips {
		if hp := hostPrefix(vip); !have[hp] {
			ipc.SrcIpAddrs = append(ipc.SrcIpAddrs, hp)
			have[hp] = true
			changed = true
		}
	}
	policies := map[string]*networkservice.PolicyRoute{}
	for _, p := range ipc.GetPolicies() {
		policies[p.GetFrom()] = p
	}
	for _, vip := range vips {
		gw := v4
		if vip.Is6() {
			gw = v6
		}
		if !gw.IsValid() {
			continue
		}
		from := hostPrefix(vip)
		want := &networkservice.Route{Prefix: defaultRoute(vip), NextHop: gw.String()}
		if p, ok := policies[from]; ok && len(p.GetRoutes()) == 1 &&
			p.GetRoutes()[0].GetPrefix() == want.GetPrefix() && p.GetRoutes()[0].GetNextHop() == want.GetNextHop() {
			continue
		}
		if p, ok := policies[from]; ok {
			p.Routes = []*networkservice.Route{want}
		} else {
			p := &networkservice.PolicyRoute{From: from, Routes: []*networkservice.Route{want}}
			ipc.Policies = append(ipc.Policies, p)
			policies[from] = p
		}
		changed = true
	}
	return changed
}

// carriesVIPs reports whether conn already has everything withVIPs would
// add for vips: each VIP as a source address and its policy route.
func carriesVIPs(conn *networkservice.Connection, vips []netip.Addr) bool {
	return !withVIPs(conn.Clone(), vips)
}

// ownAddrs are the connection's source addresses that are not VIPs: what the
// proxy handed out to this target.
func ownAddrs(conn *networkservice.Connection, vips []netip.Addr) []netip.Addr {
	isVIP := map[netip.Addr]bool{}
	for _, v := range vips {
		isVIP[v] = true
	}
	var out []netip.Addr
	for _, s := range conn.GetContext().GetIpContext().GetSrcIpAddrs() {
		p, err := netip.ParsePrefix(s)
		if err != nil || isVIP[p.Addr()] {
			continue
		}
		out = append(out, p.Addr())
	}
	return out
}
