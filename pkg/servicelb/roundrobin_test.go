package servicelb

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/clock"
)

var (
	foo  = ServicePortName{Namespace: "ns", Name: "foo", Port: "p"}
	fooQ = ServicePortName{Namespace: "ns", Name: "foo", Port: "q"}
	bar  = ServicePortName{Namespace: "ns", Name: "bar", Port: "p"}
)

func client(n int) netip.Addr { return netip.AddrFrom4([4]byte{127, 0, 0, byte(n)}) }

func ep(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }

// lbCase is a sequence of steps on one balancer; picks name the expected
// endpoint by its position in the order installed at that moment, since
// every change reshuffles.
type lbCase struct {
	name  string
	steps []lbStep
}

type lbStep func(t *testing.T, lb *LoadBalancerRR, clk *clock.Fake, pinned map[int]netip.AddrPort)

// update installs endpoints: svc name -> port name -> addresses.
func update(eps map[string]map[string][]string) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		var all []Endpoints
		for name, ports := range eps {
			e := Endpoints{Namespace: "ns", Name: name}
			for port, addrs := range ports {
				p := EndpointPort{Name: port}
				for _, a := range addrs {
					p.Addresses = append(p.Addresses, ep(a))
				}
				e.Ports = append(e.Ports, p)
			}
			all = append(all, e)
		}
		lb.OnEndpointsUpdate(all)
	}
}

func newService(svc ServicePortName, aff AffinityType, ttl time.Duration) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		require.NoError(t, lb.NewService(svc, aff, ttl))
	}
}

// pick expects client c to get the endpoint at position pos of svc's
// current order; pos -1 means "the one c was pinned to before".
func pick(svc ServicePortName, c, pos int) lbStep {
	return pickReset(svc, c, pos, false)
}

func pickReset(svc ServicePortName, c, pos int, reset bool) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, pinned map[int]netip.AddrPort) {
		t.Helper()
		got, err := lb.NextEndpoint(svc, client(c), reset)
		require.NoError(t, err)
		want := pinned[c]
		if pos >= 0 {
			order := lb.Endpoints(svc)
			require.Less(t, pos, len(order))
			want = order[pos]
		}
		require.Equal(t, want, got, "client %d on %s (reset %v)", c, svc, reset)
		pinned[c] = got
	}
}

func pickErr(svc ServicePortName, want error) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		_, err := lb.NextEndpoint(svc, client(1), false)
		require.ErrorIs(t, err, want)
	}
}

// pickAny expects client c to get some endpoint of svc other than the one
// it was pinned to (its endpoint went away).
func pickMoved(svc ServicePortName, c int) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, pinned map[int]netip.AddrPort) {
		got, err := lb.NextEndpoint(svc, client(c), false)
		require.NoError(t, err)
		require.NotEqual(t, pinned[c], got)
		require.Contains(t, lb.Endpoints(svc), got)
		pinned[c] = got
	}
}

func advance(d time.Duration) lbStep {
	return func(_ *testing.T, _ *LoadBalancerRR, clk *clock.Fake, _ map[int]netip.AddrPort) {
		clk.Advance(d)
	}
}

func cleanup(svc ServicePortName) lbStep {
	return func(_ *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		lb.CleanupStaleStickySessions(svc)
	}
}

func deleteService(svc ServicePortName) lbStep {
	return func(_ *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) { lb.DeleteService(svc) }
}

// sameOrder asserts that svc's order did not change since the step that
// saved it.
func saveOrder(svc ServicePortName, into *[]netip.AddrPort) lbStep {
	return func(_ *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		*into = lb.Endpoints(svc)
	}
}

func sameOrder(svc ServicePortName, saved *[]netip.AddrPort) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		require.Equal(t, *saved, lb.Endpoints(svc))
	}
}

func TestLoadBalancerRR(t *testing.T) {
	three := map[string]map[string][]string{"foo": {"p": {"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"}}}
	var saved []netip.AddrPort
	cases := []lbCase{
		{"unknown service", []lbStep{pickErr(foo, ErrMissingServiceEntry)}},
		{"declared service without endpoints", []lbStep{
			newService(foo, AffinityNone, 0), pickErr(foo, ErrMissingEndpoints)}},
		{"single endpoint", []lbStep{
			pickErr(foo, ErrMissingServiceEntry),
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.1:40"}}}),
			pick(foo, 1, 0), pick(foo, 1, 0), pick(foo, 2, 0), pick(foo, 1, 0)}},
		{"multiple endpoints wrap", []lbStep{
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.1:1", "10.0.0.1:2", "10.0.0.1:3"}}}),
			pick(foo, 1, 0), pick(foo, 1, 1), pick(foo, 1, 2), pick(foo, 1, 0)}},
		{"ports balance independently", []lbStep{
			update(map[string]map[string][]string{"foo": {
				"p": {"10.0.0.1:1", "10.0.0.2:1", "10.0.0.3:3"},
				"q": {"10.0.0.1:2", "10.0.0.2:2", "10.0.0.3:4"}}}),
			pick(foo, 1, 0), pick(fooQ, 1, 0), pick(foo, 1, 1), pick(foo, 1, 2),
			pick(fooQ, 1, 1), pick(foo, 1, 0), pick(fooQ, 1, 2), pick(fooQ, 1, 0)}},
		{"new endpoint set restarts at the head, empty set errors", []lbStep{
			update(three), pick(foo, 1, 0), pick(foo, 1, 1),
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.4:80", "10.0.0.5:80"}}}),
			pick(foo, 1, 0), pick(foo, 1, 1), pick(foo, 1, 0),
			update(nil), pickErr(foo, ErrMissingServiceEntry)}},
		{"declared service keeps its state when endpoints vanish", []lbStep{
			newService(foo, AffinityClientIP, time.Minute), update(three), pick(foo, 1, 0),
			update(nil), pickErr(foo, ErrMissingEndpoints),
			update(three), pick(foo, 2, 0), pick(foo, 2, -1)}},
		{"reordered endpoints keep order and position", []lbStep{
			update(three), pick(foo, 1, 0), saveOrder(foo, &saved),
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.3:80", "10.0.0.1:80", "10.0.0.2:80"}}}),
			sameOrder(foo, &saved), pick(foo, 1, 1), pick(foo, 1, 2)}},
		{"invalid endpoints are dropped", []lbStep{
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.1:0", "0.0.0.0:80", "10.0.0.2:80"}}}),
			pick(foo, 1, 0), pick(foo, 1, 0)}},
		{"removing a service leaves the others where they were", []lbStep{
			update(map[string]map[string][]string{"foo": three["foo"], "bar": {"p": {"10.1.0.1:456", "10.1.0.2:456", "10.1.0.3:456"}}}),
			pick(foo, 1, 0), pick(bar, 1, 0), pick(foo, 1, 1), pick(bar, 1, 1),
			update(map[string]map[string][]string{"bar": {"p": {"10.1.0.1:456", "10.1.0.2:456", "10.1.0.3:456"}}}),
			pickErr(foo, ErrMissingServiceEntry), pick(bar, 1, 2), pick(bar, 1, 0)}},
		{"sticky, NewService first", []lbStep{
			newService(foo, AffinityClientIP, 0), update(three),
			pick(foo, 1, 0), pick(foo, 1, 0), pick(foo, 1, 0),
			pick(foo, 2, 1), pick(foo, 2, 1), pick(foo, 3, 2), pick(foo, 3, 2),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 2)}},
		{"sticky, NewService second", []lbStep{
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.1:80", "10.0.0.2:80"}}}),
			newService(foo, AffinityClientIP, 0),
			pick(foo, 1, 0), pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 2, 1),
			pick(foo, 3, 0), pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 0)}},
		{"affinity None is plain round robin whatever the client", []lbStep{
			newService(foo, AffinityNone, 0), update(three),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 1, 2), pick(foo, 2, 0), pick(foo, 1, 1)}},
		{"sticky, one endpoint removed then one added", []lbStep{
			newService(foo, AffinityClientIP, 0), update(three),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 2),
			// Drop whichever endpoint client 3 holds; clients 1 and 2 keep theirs.
			dropPinned(foo, 3), pick(foo, 1, -1), pick(foo, 2, -1), pick(foo, 3, 0),
			addEndpoint(foo, "10.0.0.9:80"),
			pick(foo, 1, -1), pick(foo, 2, -1), pick(foo, 3, -1),
			pick(foo, 4, 0), pick(foo, 5, 1), pick(foo, 6, 2)}},
		{"sticky, disjoint update drops all affinity", []lbStep{
			newService(foo, AffinityClientIP, 0), update(three),
			pick(foo, 1, 0), pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 2), pick(foo, 1, 0),
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.4:80", "10.0.0.5:80"}}}),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 1, 0), pick(foo, 2, 1),
			update(nil), pickErr(foo, ErrMissingEndpoints)}},
		{"sticky, service removal keeps the other's affinity", []lbStep{
			newService(foo, AffinityClientIP, 0), newService(bar, AffinityClientIP, 0),
			update(map[string]map[string][]string{"foo": three["foo"], "bar": {"p": {"10.1.0.1:1", "10.1.0.2:1"}}}),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 2), pick(bar, 1, 0), pick(bar, 2, 1),
			deleteService(foo), pickErr(foo, ErrMissingServiceEntry),
			pick(bar, 1, 0), pick(bar, 2, 1), pick(bar, 1, 0), pick(bar, 2, 1)}},
		{"dial failure resets walk the shared ring", []lbStep{
			newService(foo, AffinityClientIP, 0), update(three),
			pick(foo, 1, 0), pick(foo, 2, 1), pick(foo, 3, 2),
			pickReset(foo, 1, 0, true), pickReset(foo, 1, 1, true), pickReset(foo, 1, 2, true),
			pick(foo, 2, 1), pick(foo, 1, 2),
			pickReset(foo, 2, 0, true), pickReset(foo, 3, 1, true), pickReset(foo, 1, 2, true),
			pick(foo, 2, 0), pick(foo, 3, 1)}},
		{"affinity expires after its timeout", []lbStep{
			newService(foo, AffinityClientIP, time.Minute), update(three),
			pick(foo, 1, 0), advance(59 * time.Second), pick(foo, 1, 0),
			advance(59 * time.Second), pick(foo, 1, 0), // refreshed by the previous pick
			advance(time.Minute), pick(foo, 1, 1)}},
		{"stale sessions are cleaned up", []lbStep{
			newService(foo, AffinityClientIP, time.Minute), update(three),
			pick(foo, 1, 0), pick(foo, 2, 1), advance(30 * time.Second), pick(foo, 2, 1),
			advance(30 * time.Second), cleanup(foo),
			expectClients(foo, 2), pick(foo, 1, 2)}},
		{"a later NewService applies its timeout", []lbStep{
			update(three), newService(foo, AffinityClientIP, 10*time.Second),
			pick(foo, 1, 0), advance(10 * time.Second), pick(foo, 1, 1)}},
		{"affinity key is the client IP only", []lbStep{
			newService(foo, AffinityClientIP, 0), update(three), pick(foo, 1, 0), samePortless(foo, 1)}},
		{"duplicates get their share", []lbStep{
			update(map[string]map[string][]string{"foo": {"p": {"10.0.0.1:80", "10.0.0.1:80", "10.0.0.2:80"}}}),
			expectShare(foo, 300, map[string]int{"10.0.0.1:80": 200, "10.0.0.2:80": 100})}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1_000_000, 0))
			lb := NewLoadBalancerRRWithClock(clk)
			pinned := make(map[int]netip.AddrPort)
			for _, s := range tc.steps {
				s(t, lb, clk, pinned)
			}
		})
	}
}

// dropPinned removes the endpoint client c is pinned to from svc.
func dropPinned(svc ServicePortName, c int) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, pinned map[int]netip.AddrPort) {
		var keep []netip.AddrPort
		for _, e := range lb.Endpoints(svc) {
			if e != pinned[c] {
				keep = append(keep, e)
			}
		}
		lb.OnEndpointsUpdate([]Endpoints{{Namespace: svc.Namespace, Name: svc.Name, Ports: []EndpointPort{{Name: svc.Port, Addresses: keep}}}})
	}
}

func addEndpoint(svc ServicePortName, a string) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		eps := append(lb.Endpoints(svc), ep(a))
		lb.OnEndpointsUpdate([]Endpoints{{Namespace: svc.Namespace, Name: svc.Name, Ports: []EndpointPort{{Name: svc.Port, Addresses: eps}}}})
	}
}

// expectClients asserts that only client c's record survived: the others
// are assigned afresh (checked by the caller's next picks).
func expectClients(svc ServicePortName, c int) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		lb.mu.Lock()
		defer lb.mu.Unlock()
		got := lb.services[svc].clients
		require.Len(t, got, 1)
		require.Contains(t, got, client(c))
	}
}

// samePortless asserts two source ports of one client IP share affinity
// (the balancer never sees ports: the key is the address).
func samePortless(svc ServicePortName, c int) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, pinned map[int]netip.AddrPort) {
		mapped := netip.AddrFrom16(client(c).As16()) // ::ffff:127.0.0.c is the same client
		got, err := lb.NextEndpoint(svc, mapped, false)
		require.NoError(t, err)
		require.Equal(t, pinned[c], got)
	}
}

func expectShare(svc ServicePortName, n int, want map[string]int) lbStep {
	return func(t *testing.T, lb *LoadBalancerRR, _ *clock.Fake, _ map[int]netip.AddrPort) {
		got := make(map[string]int)
		for i := range n {
			e, err := lb.NextEndpoint(svc, client(i%5), false)
			require.NoError(t, err)
			got[e.String()]++
		}
		assert.Equal(t, want, got)
	}
}

func TestServicePortNameString(t *testing.T) {
	for _, tc := range []struct {
		n    ServicePortName
		want string
	}{
		{ServicePortName{"ns", "a", "p"}, "ns/a:p"},
		{ServicePortName{"ns", "a", ""}, "ns/a"},
	} {
		assert.Equal(t, tc.want, tc.n.String())
	}
}

func TestPortInfosNormalise(t *testing.T) {
	s := Service{Ref: Reference{"ns", "a", "u1"}, IP: netip.MustParseAddr("::ffff:10.9.0.1"),
		Ports: []ServicePort{{Name: "p", Port: 80, Protocol: TCP}}, Affinity: AffinityClientIP}
	got := s.PortInfos()
	require.Len(t, got, 1)
	assert.Equal(t, netip.MustParseAddr("10.9.0.1"), got[0].IP)
	assert.Equal(t, DefaultAffinityTimeout, got[0].AffinityTimeout)
	assert.Equal(t, Reference{"ns", "a", "u1"}, got[0].Ref)
	assert.Empty(t, Service{Ports: s.Ports}.PortInfos(), "no IP, not served")
	s.Affinity = ""
	assert.Equal(t, AffinityNone, s.PortInfos()[0].Affinity)
	assert.Zero(t, s.PortInfos()[0].AffinityTimeout)
}
