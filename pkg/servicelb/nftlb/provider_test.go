package nftlb

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
)

func newTestProvider(t testing.TB, topo *slbtest.Topology, opts Options) *Provider {
	t.Helper()
	opts.NetNS = topo.Proxy.Handle
	opts.Logger = slbtest.Logger()
	p, err := New(opts)
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NoError(t, p.Close())
		require.False(t, topo.TableExists(t, TableName), "table left behind after Close")
	})
	return p
}

// chains lists our table's chains by name prefix.
func chains(t testing.TB, topo *slbtest.Topology, prefix string) []string {
	t.Helper()
	c, err := kernel.NFT(topo.Proxy.Handle)
	require.NoError(t, err)
	all, err := c.ListChainsOfTableFamily(kernel.Table(TableName).Family)
	require.NoError(t, err)
	var out []string
	for _, ch := range all {
		if ch.Table.Name == TableName && strings.HasPrefix(ch.Name, prefix) {
			out = append(out, ch.Name)
		}
	}
	return out
}

func subject(t *testing.T, topo *slbtest.Topology) *slbtest.Subject {
	topo.BridgeNetfilter(t)
	p := newTestProvider(t, topo, Options{})
	return &slbtest.Subject{Topo: topo, Provider: p, SyncNow: p.SyncNow, Table: TableName, Removed: func(t *testing.T, svc servicelb.ServicePortInfo) {
		for _, prefix := range []string{"ip-", "svc-", "ep-"} {
			assert.Empty(t, chains(t, topo, prefix), "%s chains of the removed service remain", prefix)
		}
	}}
}

func TestNftablesScenarios(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	slbtest.RunScenarios(t, topo, echo, func(t *testing.T) *slbtest.Subject { return subject(t, topo) })
}

// TestHairpin: client and endpoints are ports of one bridge, so an
// endpoint's reply goes straight back over the bridge. With bridge
// netfilter it still meets our connection tracking and comes back from the
// service IP:port; the endpoint sees the client's own address.
func TestHairpin(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s := subject(t, topo)
	for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
		for _, proto := range []servicelb.Protocol{servicelb.TCP, servicelb.UDP} {
			s.Apply(t, slbtest.Config{IP: ip, Port: 80, Protocol: proto, Hosts: topo.Endpoints, EPPort: echo.Port})
			// The client's sockets only accept answers from the service
			// address, so an answer at all proves the reverse translation.
			g, err := s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
			require.NoError(t, err, "%s %s", proto, ip)
			assert.Equal(t, topo.Client.Addr(ip), g.Source, "the endpoint sees the client's address")
		}
	}
	t.Run("without bridge netfilter the reply bypasses the translation", func(t *testing.T) {
		for _, key := range []string{"net.bridge.bridge-nf-call-iptables", "net.bridge.bridge-nf-call-ip6tables"} {
			require.NoError(t, kernel.SetSysctl(topo.Proxy.Handle, key, "0"))
		}
		s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP4, Port: 81, Protocol: servicelb.UDP, Hosts: topo.Endpoints, EPPort: echo.Port})
		_, err := s.Hello(t, servicelb.UDP, netip.AddrPortFrom(slbtest.ServiceIP4, 81))
		require.True(t, slbtest.IsTimeout(err), "answer without bridge netfilter: %v", err)
	})
}

// TestSelfHairpin: a client that is itself an endpoint of the service it
// calls (a target reaching a service over the connected targets) gets the
// flows that come back to it: they are masqueraded to the bridge address,
// so that the answer returns through the proxy and its translation. The
// client's bridge port needs hairpin mode (the flow leaves by the port it
// came in); without it, nothing comes back.
func TestSelfHairpin(t *testing.T) {
	topo := slbtest.New(t, 0)
	echo := slbtest.StartEcho(t, []*slbtest.Host{topo.Client})
	s := subject(t, topo)
	s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP4, Port: 81, Protocol: servicelb.TCP, Hosts: []*slbtest.Host{topo.Client}, EPPort: echo.Port})
	_, err := s.Hello(t, servicelb.TCP, netip.AddrPortFrom(slbtest.ServiceIP4, 81))
	require.Error(t, err, "without hairpin mode on the client's port")
	topo.Proxy.MustExec(t, "ip", "link", "set", "dev", "v0", "type", "bridge_slave", "hairpin", "on")
	for _, ip := range []netip.Addr{slbtest.ServiceIP4, slbtest.ServiceIP6} {
		for _, proto := range []servicelb.Protocol{servicelb.TCP, servicelb.UDP} {
			s.Apply(t, slbtest.Config{IP: ip, Port: 80, Protocol: proto, Hosts: []*slbtest.Host{topo.Client}, EPPort: echo.Port})
			g, err := s.Hello(t, proto, netip.AddrPortFrom(ip, 80))
			require.NoError(t, err, "%s %s", proto, ip)
			assert.Equal(t, topo.Client.Name, g.Endpoint)
			assert.NotEqual(t, topo.Client.Addr(ip), g.Source, "the flow reaches the client from the proxy's address")
		}
	}
}

// TestIncrementalSync: a change costs objects in proportion to itself.
func TestIncrementalSync(t *testing.T) {
	topo := slbtest.New(t, 0)
	p := newTestProvider(t, topo, Options{})
	svcs, eps := syntheticServices(50, 3, servicelb.AffinityClientIP)
	p.OnServiceUpdate(svcs)
	p.OnEndpointsUpdate(eps)
	require.NoError(t, p.SyncNow())
	first := p.Stats().LastObjects
	require.NoError(t, p.SyncNow())
	assert.Zero(t, p.Stats().LastObjects, "a sync without change sends nothing")
	// Reordered endpoints are no change either.
	for i := range eps {
		a := eps[i].Ports[0].Addresses
		a[0], a[2] = a[2], a[0]
	}
	p.OnEndpointsUpdate(eps)
	require.NoError(t, p.SyncNow())
	assert.Zero(t, p.Stats().LastObjects)
	changeOneEndpoint(eps)
	p.OnEndpointsUpdate(eps)
	require.NoError(t, p.SyncNow())
	one := p.Stats().LastObjects
	assert.Positive(t, one)
	assert.Less(t, one, 20, "one changed endpoint sent %d objects", one)
	t.Logf("FIGURE: 50 service ports from empty: %d objects; one changed endpoint: %d objects", first, one)
}

// syntheticServices returns n single-port TCP services on distinct IPs
// with k endpoints each.
func syntheticServices(n, k int, aff servicelb.AffinityType) ([]servicelb.Service, []servicelb.Endpoints) {
	var svcs []servicelb.Service
	var eps []servicelb.Endpoints
	for i := range n {
		name := "svc" + strconv.Itoa(i)
		ip := netip.AddrFrom4([4]byte{10, 100, byte(i >> 8), byte(i)})
		svcs = append(svcs, servicelb.Service{Ref: servicelb.Reference{Namespace: "bench", Name: name}, IP: ip,
			Affinity: aff, AffinityTimeout: time.Minute, Ports: []servicelb.ServicePort{{Name: "p", Port: 80, Protocol: servicelb.TCP}}})
		var addrs []netip.AddrPort
		for j := range k {
			addrs = append(addrs, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}), uint16(8000+j)))
		}
		eps = append(eps, servicelb.Endpoints{Namespace: "bench", Name: name, Ports: []servicelb.EndpointPort{{Name: "p", Addresses: addrs}}})
	}
	return svcs, eps
}

func changeOneEndpoint(eps []servicelb.Endpoints) {
	a := eps[len(eps)/2].Ports[0].Addresses
	a[0] = netip.AddrPortFrom(a[0].Addr(), a[0].Port()+1000)
}

// TestPortStates: the provider shows each service port with its endpoints,
// chain and the new flows its dispatch rule counted.
func TestPortStates(t *testing.T) {
	topo := slbtest.New(t, 3)
	echo := slbtest.StartEcho(t, topo.Endpoints)
	s := subject(t, topo)
	p := s.Provider.(*Provider)
	s.Apply(t, slbtest.Config{IP: slbtest.ServiceIP4, Port: 80, Protocol: servicelb.TCP, Hosts: topo.Endpoints, EPPort: echo.Port})
	for range 4 {
		_, err := s.Hello(t, servicelb.TCP, netip.AddrPortFrom(slbtest.ServiceIP4, 80))
		require.NoError(t, err)
	}
	st := p.PortStates()
	require.Len(t, st, 1)
	assert.Equal(t, slbtest.SvcName.String(), st[0].Service)
	assert.Len(t, st[0].Endpoints, 3)
	assert.NotEmpty(t, st[0].Chain)
	assert.EqualValues(t, 4, st[0].NewFlows, "one counted packet per new connection")
}

// A flush of stale UDP flows that fails is tried again by the next sync,
// even one that changes nothing.
func TestStaleUDPFlushRetried(t *testing.T) {
	topo := slbtest.New(t, 0)
	p := newTestProvider(t, topo, Options{})
	var calls [][]kernel.StaleUDP
	fail := true
	p.syncMu.Lock()
	p.stale.FlushFunc = func(ns netns.NsHandle, stale []kernel.StaleUDP) (int, error) {
		calls = append(calls, slices.Clone(stale))
		if fail {
			fail = false
			return 0, errors.New("injected conntrack failure")
		}
		return kernel.FlushUDP(ns, stale)
	}
	p.syncMu.Unlock()

	ip := netip.MustParseAddr("10.96.0.53")
	svc := servicelb.Service{Ref: servicelb.Reference{Namespace: "ns", Name: "dns"}, IP: ip,
		Ports: []servicelb.ServicePort{{Name: "dns", Port: 53, Protocol: servicelb.UDP}}}
	ep := netip.MustParseAddrPort("10.200.0.1:5353")
	p.OnServiceUpdate([]servicelb.Service{svc})
	p.OnEndpointsUpdate([]servicelb.Endpoints{{Namespace: "ns", Name: "dns",
		Ports: []servicelb.EndpointPort{{Name: "dns", Addresses: []netip.AddrPort{ep}}}}})
	require.NoError(t, p.SyncNow())
	require.Empty(t, calls, "nothing stale yet")

	p.OnEndpointsUpdate(nil)
	require.ErrorContains(t, p.SyncNow(), "injected conntrack failure")
	require.NoError(t, p.SyncNow(), "the next sync, without a change")
	stale := []kernel.StaleUDP{{Service: netip.AddrPortFrom(ip, 53), Endpoint: ep}}
	require.Equal(t, [][]kernel.StaleUDP{stale, stale}, calls, "the failed flush is tried again")
	require.NoError(t, p.SyncNow())
	require.Len(t, calls, 2, "and only until it worked")
}
