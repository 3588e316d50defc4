package interfacemonitor

import (
	"fmt"
	"net/netip"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// interfaceOf describes the proxy-side interface of an established
// connection: the kernel mechanism's interface name and the addresses of
// the IP context (for a target connection the proxy's side is Dst, for a
// load-balancer connection it is Src).
func interfaceOf(conn *networkservice.Connection, t proxy.ConnType) (proxy.Interface, error) {
	mech := kernelmech.ToMechanism(conn.GetMechanism())
	if mech == nil {
		return proxy.Interface{}, fmt.Errorf("connection %s has no kernel mechanism", conn.GetId())
	}
	name := mech.GetInterfaceName()
	if name == "" {
		return proxy.Interface{}, fmt.Errorf("connection %s has no interface name", conn.GetId())
	}
	ipc := conn.GetContext().GetIpContext()
	local, neighbor := ipc.GetSrcIpAddrs(), ipc.GetDstIpAddrs()
	if t == proxy.TargetConn {
		local, neighbor = neighbor, local
	}
	iface := proxy.Interface{Name: name, Type: t, ConnID: conn.GetId()}
	for _, s := range local {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return proxy.Interface{}, fmt.Errorf("connection %s: local address %q: %w", conn.GetId(), s, err)
		}
		iface.LocalAddrs = append(iface.LocalAddrs, p)
	}
	for _, s := range neighbor {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return proxy.Interface{}, fmt.Errorf("connection %s: neighbor address %q: %w", conn.GetId(), s, err)
		}
		iface.NeighborAddrs = append(iface.NeighborAddrs, p.Addr())
	}
	return iface, nil
}
