package nftlb

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"maps"
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
// map (and, with affinity, get an element). Without affinity its one rule
// depends only on the number of endpoints, so replacing an endpoint changes
// a map element and no rule.
type svcChain struct {
	v6      bool
	id      uint32
	timeout time.Duration // affinity timeout, 0 without affinity
	n       int           // endpoints
	eps     []endpoint    // with affinity only: one rule each
}

func (s svcChain) equal(o svcChain) bool {
	return s.v6 == o.v6 && s.id == o.id && s.timeout == o.timeout && s.n == o.n && slices.Equal(s.eps, o.eps)
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

// drop forgets the ids old used and cur does not.
func (i *ids) drop(old, cur *state) {
	for name := range old.names {
		if !cur.names[name] {
			delete(i.m, name)
		}
	}
}

// portInput is what one service port's objects derive from.
type portInput struct {
	info servicelb.ServicePortInfo
	eps  []netip.AddrPort // of the service's family, sorted
}

func (a portInput) equal(b portInput) bool {
	return a.info == b.info && slices.Equal(a.eps, b.eps)
}

// inputs are all service ports, with their names by service IP.
type inputs struct {
	ports map[servicelb.ServicePortName]portInput
	byIP  map[netip.Addr][]servicelb.ServicePortName
}

func newInputs(ports map[servicelb.ServicePortName]servicelb.ServicePortInfo, endpoints map[servicelb.ServicePortName][]netip.AddrPort) inputs {
	in := inputs{ports: make(map[servicelb.ServicePortName]portInput, len(ports)), byIP: make(map[netip.Addr][]servicelb.ServicePortName)}
	for name, pi := range ports {
		var eps []netip.AddrPort
		for _, e := range endpoints[name] {
			if e.Addr().Is4() == pi.IP.Is4() {
				eps = append(eps, e)
			}
		}
		// A fixed order: a reordered but equal list changes nothing.
		slices.SortFunc(eps, netip.AddrPort.Compare)
		in.ports[name] = portInput{info: pi, eps: eps}
		in.byIP[pi.IP] = append(in.byIP[pi.IP], name)
	}
	return in
}

// endpointAddrs are the addresses of every endpoint of in.
func (in inputs) endpointAddrs() map[netip.Addr]bool {
	out := make(map[netip.Addr]bool)
	for _, p := range in.ports {
		for _, e := range p.eps {
			out[e.Addr()] = true
		}
	}
	return out
}

// changed lists the service ports added, removed or changed from a to b.
func changed(a, b inputs) []servicelb.ServicePortName {
	var out []servicelb.ServicePortName
	for name, pb := range b.ports {
		if pa, ok := a.ports[name]; !ok || !pa.equal(pb) {
			out = append(out, name)
		}
	}
	for name := range a.ports {
		if _, ok := b.ports[name]; !ok {
			out = append(out, name)
		}
	}
	return out
}

func portKey(name servicelb.ServicePortName, pi servicelb.ServicePortInfo) string {
	return fmt.Sprintf("%s|%s|%s|%s", name, pi.Addr(), pi.Protocol, pi.Affinity)
}

func svcChainName(name servicelb.ServicePortName, pi servicelb.ServicePortInfo) string {
	return "svc-" + hash(portKey(name, pi))
}

// allPorts lists the names of every service port of in.
func (in inputs) allPorts() []servicelb.ServicePortName {
	return slices.Collect(maps.Keys(in.ports))
}

// desired computes the objects of the named service ports of in, with the
// IP chains of their service IPs. Names derive from what the object
// serves, so that an unchanged endpoint keeps its id (its clients stay)
// whatever else changes.
func desired(in inputs, names []servicelb.ServicePortName, id *ids) *state {
	st := newState()
	for _, name := range names {
		input, ok := in.ports[name]
		if !ok {
			continue
		}
		pi, eps := input.info, input.eps
		key := portKey(name, pi)
		svcName := svcChainName(name, pi)
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
			if sc.timeout > 0 {
				sc.eps = append(sc.eps, ep)
			}
		}
		sc.n = len(eps)
		st.services[svcName] = sc
		st.dispatch[pi.IP] = ipChainOf(in, pi.IP)
	}
	return st
}

// ipChainOf is the chain of service IP ip: one rule per service port.
func ipChainOf(in inputs, ip netip.Addr) ipChain {
	ic := ipChain{name: "ip-" + hash(ip.String())}
	for _, name := range in.byIP[ip] {
		pi := in.ports[name].info
		ic.ports = append(ic.ports, portRule{proto: pi.Protocol, port: pi.Port, chain: svcChainName(name, pi)})
	}
	slices.SortFunc(ic.ports, func(a, b portRule) int {
		return cmp.Or(cmp.Compare(a.port, b.port), cmp.Compare(a.proto, b.proto), cmp.Compare(a.chain, b.chain))
	})
	return ic
}

// merge makes applied equal to the whole state after a sync that turned
// fragment old into fragment cur.
func (st *state) merge(old, cur *state) {
	for k := range old.services {
		delete(st.services, k)
	}
	for k := range old.rr {
		delete(st.rr, k)
	}
	for k := range old.names {
		delete(st.names, k)
	}
	for k := range old.ports {
		delete(st.ports, k)
	}
	for ip := range old.dispatch {
		delete(st.dispatch, ip)
	}
	maps.Copy(st.services, cur.services)
	maps.Copy(st.rr, cur.rr)
	maps.Copy(st.names, cur.names)
	maps.Copy(st.ports, cur.ports)
	maps.Copy(st.dispatch, cur.dispatch)
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
