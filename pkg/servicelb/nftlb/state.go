package nftlb

import (
	"fmt"
	"hash/fnv"
	"net/netip"
	"slices"
	"time"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// state is the content of our table, as plain values that compare, so that
// a sync can send only what differs from the state last applied.
type state struct {
	// dispatch: service IP -> chain holding one rule per service port.
	dispatch map[netip.Addr]ipChain
	services map[string]svcChain // by chain name
	eps      map[string]epChain  // by chain name
	affinity map[string]affSet   // by set name
	// ports is what conntrack flushing needs: the UDP service ports and
	// their endpoints.
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

// svcChain picks an endpoint: affinity lookups first (one per endpoint),
// then the round robin over eps.
type svcChain struct {
	v6       bool
	eps      []string // endpoint chain names, in round-robin order
	affinity []string // affinity set of each endpoint, or nil
}

func (s svcChain) equal(o svcChain) bool {
	return s.v6 == o.v6 && slices.Equal(s.eps, o.eps) && slices.Equal(s.affinity, o.affinity)
}

// epChain records the client in its affinity set and DNATs to the endpoint.
type epChain struct {
	to       netip.AddrPort
	affinity string // set name, "" without affinity
	timeout  time.Duration
}

type affSet struct {
	v6      bool
	timeout time.Duration
}

type portState struct {
	info servicelb.ServicePortInfo
	eps  []netip.AddrPort
}

func newState() *state {
	return &state{
		dispatch: make(map[netip.Addr]ipChain),
		services: make(map[string]svcChain),
		eps:      make(map[string]epChain),
		affinity: make(map[string]affSet),
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

// desired computes the table for the service ports and their endpoints.
// Names derive from what the object serves, so that an unchanged endpoint
// keeps its chain and affinity set (its clients stay) whatever else changes.
func desired(ports map[servicelb.ServicePortName]servicelb.ServicePortInfo, endpoints map[servicelb.ServicePortName][]netip.AddrPort) *state {
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
		sc := svcChain{v6: !pi.IP.Is4()}
		for i, e := range eps {
			// The index keeps duplicates apart: each copy is one turn.
			id := hash(key, e.String(), fmt.Sprint(occurrence(eps, i)))
			ec := epChain{to: e}
			if pi.Affinity == servicelb.AffinityClientIP {
				ec.affinity = "aff-" + hash(id, pi.AffinityTimeout.String())[:16]
				ec.timeout = pi.AffinityTimeout
				st.affinity[ec.affinity] = affSet{v6: !pi.IP.Is4(), timeout: pi.AffinityTimeout}
				sc.affinity = append(sc.affinity, ec.affinity)
			}
			epName := "ep-" + id
			st.eps[epName] = ec
			sc.eps = append(sc.eps, epName)
		}
		st.services[svcName] = sc
		ic := st.dispatch[pi.IP]
		ic.name = "ip-" + hash(pi.IP.String())
		ic.ports = append(ic.ports, portRule{proto: pi.Protocol, port: pi.Port, chain: svcName})
		st.dispatch[pi.IP] = ic
	}
	for ip, ic := range st.dispatch {
		slices.SortFunc(ic.ports, func(a, b portRule) int {
			if a.port != b.port {
				return int(a.port) - int(b.port)
			}
			if a.proto != b.proto {
				if a.proto < b.proto {
					return -1
				}
				return 1
			}
			if a.chain < b.chain {
				return -1
			}
			return 1
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
