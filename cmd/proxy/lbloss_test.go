package main

import (
	"context"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	"github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/endpoint"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/sendfd"
)

// lbNSEExpiration is the NSMgr's registration lifetime in the LB loss test:
// an LB that dies without unregistering is dropped by the registry after it.
const lbNSEExpiration = 5 * time.Second

// TestProxyKernelLBDies: an LB endpoint dies without unregistering (its
// server stops, its registration is no longer refreshed, as with kill -9).
// Its connection's port and nexthop must go at once (the data path
// broke), and the full mesh must drop the endpoint when the registry
// expires it; the other LB is untouched.
func TestProxyKernelLBDies(t *testing.T) {
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("builds and runs binaries")
	}
	b := startBed(t, bedConfig{ipFamily: "ipv4", lbs: 1, nseExpiration: lbNSEExpiration})
	ok := false
	stays := b.lbs[0]
	dies := b.startFragileLB("lb-fragile")
	t.Cleanup(func() {
		if !ok {
			dump(t, b.proxyNS, stays.ns, dies.ns)
		}
	})
	joined := func(ls ...*testutil.NetNS) bool {
		ports, _ := bridgePorts(t, b.proxyNS, bridge)
		var want []netip.Addr
		for _, ns := range ls {
			v := vethsIn(t, ns)
			if len(v) != 1 || peerIn(v[0], ports) == nil {
				return false
			}
			want = append(want, byFamily(globalPrefixes(t, ns, v[0].Attrs().Name), ipamv1.IPFamily_IPV4)...)
		}
		slices.SortFunc(want, netip.Addr.Compare)
		return len(ports) == len(ls) && slices.Equal(defaultNexthops(t, b.proxyNS, table, netlink.FAMILY_V4), want)
	}
	require.Eventually(t, func() bool { return joined(stays.ns, dies.ns) }, converge, poll, "both LBs joined")

	dies.kill()
	require.Eventually(t, func() bool { return len(vethsIn(t, dies.ns)) == 0 && joined(stays.ns) }, converge, poll,
		"the dead LB's port and nexthop must go, the other LB's stay")
	b.proxy.waitLog(t, "load balancer endpoint removed", "nse", dies.name)
	require.True(t, joined(stays.ns))

	// How hard the proxy's NSM heal retried the dead LB meanwhile (a figure,
	// not a bound).
	reselects, refreshes := 0, 0
	for _, l := range b.proxy.logLines() {
		switch l["msg"] {
		case "Reconnect with reselect":
			reselects++
		case "IP context refreshed":
			refreshes++ // each one is an IPAM Allocate per address
		}
	}
	t.Logf("toward the dead LB, in the %s before the registry dropped it: %d heal reselects, %d IP context refreshes",
		lbNSEExpiration, reselects, refreshes)
	ok = true
}

// fragileLB is an LB endpoint that can die without unregistering.
type fragileLB struct {
	name   string
	ns     *testutil.NetNS
	srv    *controlplane.Server
	cancel context.CancelFunc
}

// startFragileLB serves and registers an LB endpoint like the control plane's, but
// keeps the pieces apart so that kill can stop them without unregistering.
func (b *bed) startFragileLB(name string) *fragileLB {
	t := b.t
	t.Helper()
	l := &fragileLB{name: name, ns: testutil.NewNetNS(t, "lbf")}
	ctx, cancel := context.WithCancel(b.ctx)
	l.cancel = cancel
	gen := controlplane.TokenGenerator(name, 0)
	ep := endpoint.NewServer(ctx, gen, endpoint.WithName(name), endpoint.WithAdditionalFunctionality(
		mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()}),
		netnsurl.NewServer(l.ns.Path()),
		sendfd.NewServer(),
	))
	var err error
	l.srv, err = controlplane.Serve(filepath.Join(b.dir, name+".sock"), ep.Register)
	require.NoError(t, err)
	t.Cleanup(l.kill)
	dial := controlplane.DialOptions(gen)
	require.NoError(t, controlplane.RegisterService(ctx, b.cp.NSMgrURL, dial, &registry.NetworkService{Name: lbService, Payload: payload.Ethernet}))
	_, err = controlplane.RegisterEndpoint(ctx, b.cp.NSMgrURL, dial, &registry.NetworkServiceEndpoint{
		Name:                name,
		NetworkServiceNames: []string{lbService},
		Url:                 l.srv.URL.String(),
	})
	require.NoError(t, err)
	return l
}

// kill stops serving and refreshing the registration, without
// unregistering. It is idempotent.
func (l *fragileLB) kill() {
	l.cancel()
	l.srv.Stop()
}
