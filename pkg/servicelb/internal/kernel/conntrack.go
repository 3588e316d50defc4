package kernel

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/conntrackflush"
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
	return conntrackflush.FlushMatching(ns, c, serviceAddr, func(f *conntrack.Flow) bool {
		for _, s := range stale {
			if s.match(f) {
				return true
			}
		}
		return false
	})
}

// StaleFlows owns the flush of stale UDP flows for a provider's syncs:
// Flush tries the flows a failed flush left together with the new ones,
// and keeps them all when it fails again, for the next sync. A flow
// flushed once too often only has its NAT chosen again. Not safe for
// concurrent use (a provider's sync lock guards it).
type StaleFlows struct {
	// FlushFunc flushes (nil: FlushUDP); a test sets a failing one.
	FlushFunc func(netns.NsHandle, []StaleUDP) (int, error)
	pending   []StaleUDP
}

// Flush flushes stale and the flows still pending in ns, and returns how
// many entries it deleted.
func (s *StaleFlows) Flush(ns netns.NsHandle, stale []StaleUDP) (int, error) {
	stale = slices.Concat(s.pending, stale)
	if len(stale) == 0 {
		return 0, nil
	}
	flush := s.FlushFunc
	if flush == nil {
		flush = FlushUDP
	}
	n, err := flush(ns, stale)
	if err != nil {
		slices.SortFunc(stale, compareStale)
		s.pending = slices.Compact(stale)
		return n, fmt.Errorf("flush stale UDP conntrack entries (%d kept for the next sync): %w", len(s.pending), err)
	}
	s.pending = nil
	return n, nil
}

func compareStale(a, b StaleUDP) int {
	if c := a.Service.Compare(b.Service); c != 0 {
		return c
	}
	return a.Endpoint.Compare(b.Endpoint)
}
