package servicelb

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/causeway-net/causeway/internal/clock"
)

// LoadBalancerRR is a round-robin LoadBalancer with optional ClientIP
// affinity. Each service port's endpoints are shuffled when (and only when)
// their multiset changes; the next pick then starts at the head of the new
// order. Affinity records outlive reorders and end when they expire or when
// their endpoint goes.
type LoadBalancerRR struct {
	clock clock.Clock

	mu       sync.Mutex
	services map[ServicePortName]*balancerState
}

var _ LoadBalancer = (*LoadBalancerRR)(nil)

type balancerState struct {
	endpoints []netip.AddrPort // shuffled
	index     int              // next round-robin position
	affinity  AffinityType
	ttl       time.Duration
	declared  bool // NewService was called (state outlives its endpoints)
	clients   map[netip.Addr]*affinityRecord
}

type affinityRecord struct {
	endpoint netip.AddrPort
	lastUsed time.Time
}

// NewLoadBalancerRR returns an empty balancer on the real clock.
func NewLoadBalancerRR() *LoadBalancerRR { return NewLoadBalancerRRWithClock(clock.Real()) }

// NewLoadBalancerRRWithClock returns an empty balancer on clk (a
// *clock.Fake in tests).
func NewLoadBalancerRRWithClock(clk clock.Clock) *LoadBalancerRR {
	return &LoadBalancerRR{clock: clk, services: make(map[ServicePortName]*balancerState)}
}

func newBalancerState(affinity AffinityType, ttl time.Duration) *balancerState {
	if ttl <= 0 {
		ttl = DefaultAffinityTimeout
	}
	return &balancerState{affinity: affinity, ttl: ttl, clients: make(map[netip.Addr]*affinityRecord)}
}

func (s *balancerState) sticky() bool { return s.affinity == AffinityClientIP }

// NewService declares svc. On an existing state it switches the affinity
// type (when affinity is not empty) and, unlike the Kubernetes userspace
// proxy, also applies a non-zero ttl: endpoints arriving before the service
// no longer lock the timeout at its default. Endpoints and the round-robin
// position are kept.
func (lb *LoadBalancerRR) NewService(svc ServicePortName, affinity AffinityType, ttl time.Duration) error {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	s, ok := lb.services[svc]
	if !ok {
		if affinity == "" {
			affinity = AffinityNone
		}
		s = newBalancerState(affinity, ttl)
		lb.services[svc] = s
	}
	s.declared = true
	if affinity != "" {
		s.affinity = affinity
	}
	if ttl > 0 {
		s.ttl = ttl
	}
	return nil
}

// DeleteService forgets svc entirely.
func (lb *LoadBalancerRR) DeleteService(svc ServicePortName) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	delete(lb.services, svc)
}

// ServiceHasEndpoints reports whether svc has at least one endpoint.
func (lb *LoadBalancerRR) ServiceHasEndpoints(svc ServicePortName) bool {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	s, ok := lb.services[svc]
	return ok && len(s.endpoints) > 0
}

// Endpoints returns svc's endpoints in their round-robin order.
func (lb *LoadBalancerRR) Endpoints(svc ServicePortName) []netip.AddrPort {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if s, ok := lb.services[svc]; ok {
		return slices.Clone(s.endpoints)
	}
	return nil
}

// NextEndpoint returns the endpoint for a new connection of client to svc.
func (lb *LoadBalancerRR) NextEndpoint(svc ServicePortName, client netip.Addr, reset bool) (netip.AddrPort, error) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	s, ok := lb.services[svc]
	if !ok {
		return netip.AddrPort{}, ErrMissingServiceEntry
	}
	if len(s.endpoints) == 0 {
		return netip.AddrPort{}, ErrMissingEndpoints
	}
	now := lb.clock.Now()
	client = client.Unmap()
	if s.sticky() && !reset {
		if r, ok := s.clients[client]; ok && now.Sub(r.lastUsed) < s.ttl {
			r.lastUsed = now
			return r.endpoint, nil
		}
	}
	ep := s.endpoints[s.index]
	s.index = (s.index + 1) % len(s.endpoints)
	if s.sticky() {
		s.clients[client] = &affinityRecord{endpoint: ep, lastUsed: now}
	}
	return ep, nil
}

// CleanupStaleStickySessions drops svc's affinity records that expired.
func (lb *LoadBalancerRR) CleanupStaleStickySessions(svc ServicePortName) {
	lb.mu.Lock()
	defer lb.mu.Unlock()
	s, ok := lb.services[svc]
	if !ok {
		return
	}
	now := lb.clock.Now()
	for c, r := range s.clients {
		if now.Sub(r.lastUsed) >= s.ttl {
			delete(s.clients, c)
		}
	}
}

// OnEndpointsUpdate installs the full list of endpoints. A service port
// whose endpoint multiset changed gets a fresh shuffle, its round-robin
// position back at the head and the affinity records of vanished endpoints
// dropped; one whose set is unchanged (even reordered) keeps everything. A
// service port absent from the list loses its endpoints and affinity; its
// state is kept when NewService declared it (so its affinity type is not
// forgotten) and deleted otherwise.
func (lb *LoadBalancerRR) OnEndpointsUpdate(all []Endpoints) {
	seen := make(map[ServicePortName]bool)
	lb.mu.Lock()
	defer lb.mu.Unlock()
	for _, e := range all {
		for name, eps := range e.ByPort() {
			seen[name] = true
			lb.installEndpoints(name, eps)
		}
	}
	for name, s := range lb.services {
		if seen[name] {
			continue
		}
		if !s.declared {
			delete(lb.services, name)
			continue
		}
		s.endpoints, s.index = nil, 0
		clear(s.clients)
	}
}

func (lb *LoadBalancerRR) installEndpoints(name ServicePortName, eps []netip.AddrPort) {
	s, ok := lb.services[name]
	if ok && sameMultiset(s.endpoints, eps) {
		return
	}
	if !ok {
		s = newBalancerState(AffinityNone, 0)
		lb.services[name] = s
	}
	keep := make(map[netip.AddrPort]bool, len(eps))
	for _, ep := range eps {
		keep[ep] = true
	}
	for c, r := range s.clients {
		if !keep[r.endpoint] {
			delete(s.clients, c)
		}
	}
	s.endpoints = slices.Clone(eps)
	rand.Shuffle(len(s.endpoints), func(i, j int) {
		s.endpoints[i], s.endpoints[j] = s.endpoints[j], s.endpoints[i]
	})
	s.index = 0
}

func sameMultiset(a, b []netip.AddrPort) bool {
	if len(a) != len(b) {
		return false
	}
	sa, sb := slices.Clone(a), slices.Clone(b)
	slices.SortFunc(sa, netip.AddrPort.Compare)
	slices.SortFunc(sb, netip.AddrPort.Compare)
	return slices.Equal(sa, sb)
}
