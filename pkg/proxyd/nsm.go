package proxyd

import (
	"context"
	"fmt"
	"net/netip"
	"net/url"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/client"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/sendfd"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
	nsmbackoff "github.com/causeway-net/causeway/pkg/nsm/chain/backoff"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/egress"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/keepmechanism"
	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/chain/mtu"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/registryclient"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// nsmClient is what the full mesh uses to reach the load balancers: the
// NSM client chain, the registry client and the NSMgr's connection monitor.
type nsmClient struct {
	nsc      networkservice.NetworkServiceClient
	registry registryapi.NetworkServiceEndpointRegistryClient
	nsmgr    *liveness.NSMgr // the NSMgr's connection monitor, for heal and recovery
	pinner   *fullmesh.Pinner
}

// startNSMClient builds the NSM client chain toward the load balancers and
// its registry client. The chains (and their refresh and heal goroutines)
// live until stop, after the full mesh has stopped.
func (d *Daemon) startNSMClient(ctx context.Context) (func() error, error) {
	connectTo := d.cfg.ConnectTo
	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(&connectTo), d.nsmDial...)
	if err != nil {
		return nil, err
	}
	nsmCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	d.nsm = nsmClient{nsmgr: nsmgr, pinner: fullmesh.NewPinner()}
	d.nsm.nsc = d.lbClientChain(nsmCtx)
	// The full mesh reopens its watch itself and resyncs from a listing
	// when the stream breaks; the SDK's registry heal would reopen it
	// silently and any deletion carried by the break would be lost (with
	// the NSMgr's embedded registry, the Deleted event of an unregistered
	// NSE breaks the stream: its passed socket fd is already closed).
	d.nsm.registry = registryclient.NewNSEClient(nsmCtx, &connectTo,
		registryclient.WithDialOptions(d.nsmDial...), registryclient.WithRetry())
	return func() error {
		cancel()
		_ = nsmgr.Close()
		return nil
	}, nil
}

// lbClientChain is the NSM client chain of the LB connections.
func (d *Daemon) lbClientChain(ctx context.Context) networkservice.NetworkServiceClient {
	connectTo := d.cfg.ConnectTo
	return client.NewClient(ctx,
		client.WithClientURL(&connectTo),
		client.WithName(d.cfg.Name),
		client.WithDialOptions(d.nsmDial...),
		client.WithDialTimeout(d.cfg.DialTimeout),
		client.WithAuthorizeClient(d.creds.AuthorizeClient()),
		// A heal that starts because the NSMgr went away (or came back
		// without its memory), or because the NSMgr reports down an LB
		// that still answers and is still registered (a forwarder, or
		// another node's NSMgr, replaced), re-requests as is instead of
		// closing first: the LB ports, nexthops and addresses stay while
		// NSM is away (see pkg/nsm/chain/liveness).
		client.WithHealClient(heal.NewClient(ctx, d.nsm.nsmgr.HealOptions(func(c *networkservice.Connection) bool {
			key, err := proxy.ConnKey(c, proxy.LBConn)
			return err == nil && d.links.Lost(proxy.LBConn, key)
		}, d.lbServing)...)),
		client.WithAdditionalFunctionality(
			// Heal re-requests an LB that died without unregistering as
			// fast as the failures come back; pause between failed tries
			// so that each one does not renew addresses with the IPAM.
			nsmbackoff.NewClient(nsmbackoff.WithLife(ctx)),
			d.nsm.nsmgr.NewClient(),
			kernel.NewClient(),
			connlink.NewClient(d.links),
			ipcontext.NewClient(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewClient(mtu.WithMTU(uint32(d.cfg.MTU))),
			egress.NewClient(func(serving bool) { d.health.SetServing(health.Egress, serving) }),
			d.nsm.pinner,
			sendfd.NewClient(),
		),
	)
}

// lbServing reports whether the LB of connection c still serves as far as
// the proxy can see: it answers the datapath check (lbAnswering) and the
// registry lists it (an LB that unregistered, or that a fresh listing
// missed, is believed gone when the NSMgr reports it down).
func (d *Daemon) lbServing(c *networkservice.Connection) bool {
	// d.mesh is set before the mesh runs, and so before any LB connection
	// (and its heal) exists.
	return d.mesh != nil && d.mesh.Listed(c.GetNetworkServiceEndpointName()) && d.lbAnswering(c)
}

// lbAnswering reports whether the LB of connection c answers the
// datapath check (pkg/nexthopcheck) on one of its nexthops, the LB's
// addresses in c's IP context: Up, with answers. False when the check is
// off.
func (d *Daemon) lbAnswering(c *networkservice.Connection) bool {
	if d.hopCheck == nil || d.cfg.NexthopCheckOff {
		return false
	}
	statuses := d.hopCheck.Statuses()
	for _, s := range c.GetContext().GetIpContext().GetDstIpAddrs() {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			continue
		}
		for _, st := range statuses {
			if st.Peer.Addr == p.Addr().Unmap() && st.State == nexthopcheck.Up && st.Answered > 0 {
				return true
			}
		}
	}
	return false
}

// startFullMesh connects to every load balancer of the conduit. Its stop
// returns once the mesh has stopped; it leaves the LB connections
// established, their interfaces, addresses and nexthops in the kernel, for
// the next run to resume (docs/reliability.md, "A proxy restarted in its
// namespace"). A mesh that stops by itself fails the daemon.
func (d *Daemon) startFullMesh(ctx context.Context) (func() error, error) {
	d.mesh = fullmesh.New(d.cfg.Name, d.cfg.NetworkServiceName, d.nsm.nsc, d.nsm.registry,
		fullmesh.WithPinner(d.nsm.pinner),
		fullmesh.WithRecovery(d.nsm.nsmgr.ConnStates()),
		fullmesh.WithLeaveOnStop(),
		// A removed LB's nexthops go at once; its Close may wait seconds
		// behind a heal retry toward the dead LB.
		fullmesh.WithWithdraw(func(c *networkservice.Connection) {
			if key, err := proxy.ConnKey(c, proxy.LBConn); err == nil {
				d.links.Forget(proxy.LBConn, key)
			}
		}),
		fullmesh.WithRequestTimeout(d.cfg.RequestTimeout),
		fullmesh.WithCloseTimeout(d.cfg.RequestTimeout),
		// Checked every 2 s: a dead LB goes soon after its deadline.
		fullmesh.WithExpiry(2*time.Second, d.cfg.MaxTokenLifetime/2),
		fullmesh.WithLogger(d.log.With("subsystem", "fullmesh")),
	)
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		err := d.mesh.Run(ctx)
		if ctx.Err() == nil {
			d.fail(fmt.Errorf("full mesh stopped: %w", err))
		}
	})
	return t.Stop, nil
}

// startEndpoint serves and registers the endpoint for the targets. Its
// stop unregisters it and stops its server; an endpoint that stops by
// itself fails the daemon.
func (d *Daemon) startEndpoint(ctx context.Context) (func() error, error) {
	connectTo := d.cfg.ConnectTo
	ep, err := endpoint.Start(ctx, endpoint.Config{
		Name: d.cfg.Name, Service: d.cfg.ServiceName, NodeName: d.cfg.Host, ConnectTo: &connectTo,
		TokenGenerator: d.creds.TokenGenerator(),
		DialOptions:    d.nsmDial,
		ServerOptions:  d.nsmServer,
		Elements: []networkservice.NetworkServiceServer{
			keepmechanism.NewServer(),
			mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: kernel.NewServer()}),
			connlink.NewServer(d.links),
			ipcontext.NewServer(d.proxy, ipcontext.WithLogger(d.log.With("subsystem", "ipcontext"))),
			mtu.NewServer(mtu.WithMTU(uint32(d.cfg.MTU))),
		},
	}, endpoint.WithAuthorizeServer(d.creds.AuthorizeServer()), endpoint.WithLogger(d.log.With("subsystem", "endpoint")),
		endpoint.WithRegistrationState(func(ok bool) {
			d.health.SetServing(health.NSMRegistry, ok)
			if ok {
				d.registered.happened()
			}
		}),
		// A proxy restarted while NSM is away keeps forwarding: it must
		// not wait for (nor fail on) the registry.
		endpoint.WithBackgroundRegistration(),
		endpoint.WithListenURL(listenURL(d.cfg.ListenOn)))
	if err != nil {
		return nil, err
	}
	d.ep = ep
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		select {
		case <-ctx.Done():
		case <-ep.Done():
			d.fail(fmt.Errorf("endpoint stopped: %w", ep.Err()))
		}
	})
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		err := ep.Stop(ctx)
		_ = t.Stop()
		return err
	}, nil
}

func listenURL(s string) *url.URL {
	if s == "" {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" {
		return &url.URL{Scheme: "unix", Path: s}
	}
	return u
}

// startEndpointProbe checks the endpoint's own health service, as
// Meridio's liveness probe does, and drives the NSMEndpoint subservice.
func (d *Daemon) startEndpointProbe(ctx context.Context) (func() error, error) {
	cc, err := grpc.NewClient(grpcutils.URLToTarget(d.ep.URL()), d.nsmDial...)
	if err != nil {
		// As before the split: the daemon runs on, NSMEndpoint stays unknown.
		d.log.Error("endpoint health probe", "error", err)
		return noStop, nil
	}
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) { d.probeEndpoint(ctx, healthpb.NewHealthClient(cc)) })
	return func() error {
		_ = t.Stop()
		_ = cc.Close()
		return nil
	}, nil
}

func (d *Daemon) probeEndpoint(ctx context.Context, hc healthpb.HealthClient) {
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		pctx, cancel := context.WithTimeout(ctx, d.cfg.GRPCProbeRPCTimeout)
		resp, err := hc.Check(pctx, &healthpb.HealthCheckRequest{})
		cancel()
		d.health.SetServing(health.NSMEndpoint, err == nil && resp.GetStatus() == healthpb.HealthCheckResponse_SERVING)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}
