package nftlb

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// state is the content of our table, as plain values that compare, so that
// a sync can send only what differs from the state last applied.
//
// The layout keeps a change cheap in the kernel. Per-service objects are
// chains (found by hash) and elements of shared sets (the kernel finds sets
// by walking the table's list, so there are only five); and below the
// service chain nothing jumps: the endpoint comes out of a data map and is
// DNATed in the same rule, so an endpoint change adds no goto and the
// kernel does not re-validate the whole jump graph.
type state struct {
	// dispatch: service IP -> chain holding one rule per service port.
	dispatch map[netip.Addr]ipChain
	services map[string]svcChain // by chain name
	// rr is the round-robin map: (service id, turn) -> endpoint.
	rr map[rrKey]endpoint
	// names are the keys of the ids in use.
	names map[string]bool
	// ports is what conntrack flushing needs: the service ports and their
	// endpoints.
	ports map[servicelb.ServicePortName]portState
}

type ipChain struct {
	name  string
	ports []portRule // sorted
}

type portRule struct {
	proto servicelb.Protocol
	port  uint16
	chain string
}

// svcChain picks an endpoint: with affinity, a client with a live element
// (endpoint id, client address) in the affinity set goes to that endpoint;
// the others take the next turn of the service's counter in the round-robin
// map (and, with affinity, get an element).
type svcChain struct {
	v6      bool
	id      uint32
	timeout time.Duration // affinity timeout, 0 without affinity
	eps     []endpoint    // in round-robin order
}

func (s svcChain) equal(o svcChain) bool {
	return s.v6 == o.v6 && s.id == o.id && s.timeout == o.timeout && slices.Equal(s.eps, o.eps)
}

// endpoint is one turn of a service port: the address and its id.
type endpoint struct {
	to netip.AddrPort
	id uint32
}

type rrKey struct {
	svc  uint32
	turn uint32
}

type portState struct {
	info servicelb.ServicePortInfo
	eps  []netip.AddrPort
}

func newState() *state {
	return &state{
		dispatch: make(map[netip.Addr]ipChain),
		services: make(map[string]svcChain),
		rr:       make(map[rrKey]endpoint),
		names:    make(map[string]bool),
		ports:    make(map[servicelb.ServicePortName]portState),
	}
}

func hash(parts ...string) string {
	h := fnv.New64a()
	for _, p := range parts {
		_, _ = h.Write([]byte(p))
		_, _ = h.Write([]byte{0})
	}
	return fmt.Sprintf("%016x", h.Sum64())
}

// ids hands out the numeric ids of service ports and endpoints: stable
// while they exist, never reused (so the stale affinity elements of a gone
// endpoint never match a new one; they expire unseen).
type ids struct {
	next uint32
	m    map[string]uint32
}

func (i *ids) get(name string) uint32 {
	if id, ok := i.m[name]; ok {
		return id
	}
	i.next++
	i.m[name] = i.next
	return i.next
}

// keep forgets the ids st does not use.
func (i *ids) keep(st *state) {
	for name := range i.m {
		if !st.names[name] {
			delete(i.m, name)
		}
	}
}

// desired computes the table for the service ports and their endpoints.
// Names derive from what the object serves, so that an unchanged endpoint
// keeps its chain and id (its clients stay) whatever else changes.
func desired(ports map[servicelb.ServicePortName]servicelb.ServicePortInfo, endpoints map[servicelb.ServicePortName][]netip.AddrPort, id *ids) *state {
	st := newState()
	for name, pi := range ports {
		key := fmt.Sprintf("%s|%s|%s|%s", name, pi.Addr(), pi.Protocol, pi.Affinity)
		svcName := "svc-" + hash(key)
		var eps []netip.AddrPort
		for _, e := range endpoints[name] {
			if e.Addr().Is4() == pi.IP.Is4() {
				eps = append(eps, e)
			}
		}
		// A fixed order: a reordered but equal list changes nothing.
		slices.SortFunc(eps, netip.AddrPort.Compare)
		st.ports[name] = portState{info: pi, eps: eps}
		sc := svcChain{v6: !pi.IP.Is4(), id: id.get(svcName)}
		st.names[svcName] = true
		if pi.Affinity == servicelb.AffinityClientIP {
			sc.timeout = pi.AffinityTimeout
		}
		for i, e := range eps {
			// The occurrence keeps duplicates apart: each copy is one turn.
			epName := "ep|" + hash(key, e.String(), fmt.Sprint(occurrence(eps, i)))
			st.names[epName] = true
			ep := endpoint{to: e, id: id.get(epName)}
			st.rr[rrKey{svc: sc.id, turn: uint32(i)}] = ep
			sc.eps = append(sc.eps, ep)
		}
		st.services[svcName] = sc
		ic := st.dispatch[pi.IP]
		ic.name = "ip-" + hash(pi.IP.String())
		ic.ports = append(ic.ports, portRule{proto: pi.Protocol, port: pi.Port, chain: svcName})
		st.dispatch[pi.IP] = ic
	}
	for ip, ic := range st.dispatch {
		slices.SortFunc(ic.ports, func(a, b portRule) int {
			return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.proto, b.proto), cmp.Compare(a.chain, b.chain))
		})
		st.dispatch[ip] = ic
	}
	return st
}

// occurrence counts the copies of eps[i] before position i.
func occurrence(eps []netip.AddrPort, i int) int {
	n := 0
	for _, e := range eps[:i] {
		if e == eps[i] {
			n++
		}
	}
	return n
}
