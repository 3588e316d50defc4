package proxy

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// Stats are counts for metrics.
type Stats struct {
	// Connections are the ids holding addresses with no release pending.
	Connections int `json:"connections"`
	// Allocations are the child addresses the proxy holds (bridge included).
	Allocations int `json:"allocations"`
	// PendingReleases are the ids with a release scheduled or running.
	PendingReleases int `json:"pendingReleases"`
	Ports           int `json:"ports"`
	Nexthops        int `json:"nexthops"`
	VIPs            int `json:"vips"`

	IPAMErrors        uint64 `json:"ipamErrors"`
	ApplyErrors       uint64 `json:"applyErrors"`
	Applies           uint64 `json:"applies"`
	VIPsRejected      uint64 `json:"vipsRejected"`
	Releases          uint64 `json:"releases"`
	ReleasesCancelled uint64 `json:"releasesCancelled"`
	Rollbacks         uint64 `json:"rollbacks"`
	BridgeAddrChanges uint64 `json:"bridgeAddrChanges"`
	// RenewalsDeferred counts the renewals the IPAM did not answer (the
	// connection kept its addresses); OwedRenewals are the connections
	// whose leases are still to renew.
	RenewalsDeferred uint64 `json:"renewalsDeferred"`
	OwedRenewals     int    `json:"owedRenewals"`
}

// Stats returns the current counts.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Stats{
		Allocations: len(p.bridge),
		Ports:       len(p.portsHops.ports),
		Nexthops:    len(p.portsHops.nexthops),
		VIPs:        len(p.vips),

		IPAMErrors:        p.counters.ipamErrors,
		ApplyErrors:       p.counters.applyErrors,
		Applies:           p.counters.applies,
		VIPsRejected:      p.counters.vipRejected,
		Releases:          p.counters.releases,
		ReleasesCancelled: p.counters.releaseCancel,
		Rollbacks:         p.counters.rollbacks,
		BridgeAddrChanges: p.counters.bridgeChanges,
		RenewalsDeferred:  p.counters.renewalsDeferred,
		OwedRenewals:      len(p.owed),
	}
	for _, st := range p.conns {
		s.Allocations += len(st.allocs)
		if st.release != nil {
			s.PendingReleases++
		} else if len(st.allocs) > 0 {
			s.Connections++
		}
	}
	return s
}

// Snapshot is a JSON-able dump of the proxy's model, for -debug.
type Snapshot struct {
	Conduit     string               `json:"conduit"`
	Trench      string               `json:"trench"`
	Node        string               `json:"node"`
	State       dataplane.State      `json:"desiredState"`
	Connections []ConnectionSnapshot `json:"connections"`
	Interfaces  []InterfaceSnapshot  `json:"interfaces"`
	WantedVIPs  []netip.Prefix       `json:"wantedVIPs"`
	Stats       Stats                `json:"stats"`
}

// ConnectionSnapshot is one connection id in a Snapshot.
type ConnectionSnapshot struct {
	ID   string `json:"id"`
	Type string `json:"type"`
	// Addresses maps "<family>/<child name>" to its address.
	Addresses      map[string]netip.Prefix `json:"addresses"`
	PendingRelease bool                    `json:"pendingRelease"`
	Rollback       bool                    `json:"rollback,omitempty"`
}

// InterfaceSnapshot is the link of one connection in a Snapshot, with the
// nexthops the proxy derives from the connection's addresses.
type InterfaceSnapshot struct {
	Interface
	NeighborAddrs []netip.Addr `json:"NeighborAddrs,omitempty"`
}

// Snapshot returns a copy of the model.
func (p *Proxy) Snapshot() Snapshot {
	stats := p.Stats()
	p.mu.Lock()
	defer p.mu.Unlock()
	state, _ := p.desiredStateLocked()
	s := Snapshot{
		Conduit:    p.cfg.Conduit,
		Trench:     p.cfg.Trench,
		Node:       p.cfg.Node,
		State:      state,
		WantedVIPs: slices.Clone(p.vipWanted),
		Stats:      stats,
	}
	for _, st := range p.conns {
		c := ConnectionSnapshot{ID: st.id, Type: st.typ.String(), Addresses: map[string]netip.Prefix{},
			PendingRelease: st.release != nil, Rollback: st.release != nil && !st.release.full}
		for k, a := range st.allocs {
			c.Addresses[k.Family.String()+"/"+k.Name] = a
		}
		s.Connections = append(s.Connections, c)
	}
	slices.SortFunc(s.Connections, func(a, b ConnectionSnapshot) int { return strings.Compare(a.ID, b.ID) })
	for _, id := range p.links {
		st := p.conns[id]
		s.Interfaces = append(s.Interfaces, InterfaceSnapshot{Interface: st.iface(), NeighborAddrs: slices.Clone(st.hops)})
	}
	slices.SortFunc(s.Interfaces, func(a, b InterfaceSnapshot) int { return a.Index - b.Index })
	return s
}
