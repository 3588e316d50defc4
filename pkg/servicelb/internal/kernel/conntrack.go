package kernel

import (
	"fmt"
	"net/netip"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/dataplane"
)

// StaleUDP names conntrack entries that must go: UDP flows whose original
// destination is Service and, when Endpoint is set, that were translated to
// Endpoint (their reply comes from it).
type StaleUDP struct {
	Service  netip.AddrPort
	Endpoint netip.AddrPort
}

func (s StaleUDP) match(f *conntrack.Flow) bool {
	o, r := f.TupleOrig, f.TupleReply
	if o.Proto.Protocol != unix.IPPROTO_UDP || o.IP.DestinationAddress.Unmap() != s.Service.Addr() ||
		o.Proto.DestinationPort != s.Service.Port() {
		return false
	}
	if !s.Endpoint.IsValid() {
		return true
	}
	return r.IP.SourceAddress.Unmap() == s.Endpoint.Addr() && r.Proto.SourcePort == s.Endpoint.Port()
}

// FlushUDP deletes in ns the conntrack entries that any of stale names, in
// one dump; it returns how many it deleted.
func FlushUDP(ns netns.NsHandle, stale []StaleUDP) (int, error) {
	if len(stale) == 0 {
		return 0, nil
	}
	cfg := &netlink.Config{}
	if !netnsdo.Current(ns) {
		cfg.NetNS = int(ns)
	}
	c, err := conntrack.Dial(cfg)
	if err != nil {
		return 0, fmt.Errorf("conntrack dial: %w", err)
	}
	defer c.Close()
	serviceAddr := func(a netip.Addr) bool {
		for _, s := range stale {
			if a.Unmap() == s.Service.Addr() {
				return true
			}
		}
		return false
	}
	return dataplane.FlushMatching(ns, c, serviceAddr, func(f *conntrack.Flow) bool {
		for _, s := range stale {
			if s.match(f) {
				return true
			}
		}
		return false
	})
}
