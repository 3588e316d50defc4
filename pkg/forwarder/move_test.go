package forwarder

import (
	"context"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanismtranslation"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/adapters"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/forwarder/reaper"
)

// movingClient plays the SDK's dial client when the endpoint's URL has
// changed: within the Request, it closes the connection down the chain
// (toward the old URL), then requests (through the new one).
type movingClient struct{ move bool }

func (m *movingClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	if m.move {
		_, _ = next.Client(ctx).Close(ctx, request.GetConnection(), opts...)
	}
	return next.Client(ctx).Request(ctx, request, opts...)
}

func (m *movingClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// kernelEndpoint plays the endpoint: it takes the connection's kernel
// mechanism, or else the first kernel preference (as the SDK's kernel
// server, keeping the name asked for), in its namespace.
type kernelEndpoint struct{ netnsURL string }

func (e *kernelEndpoint) Request(_ context.Context, request *networkservice.NetworkServiceRequest, _ ...grpc.CallOption) (*networkservice.Connection, error) {
	conn := request.GetConnection().Clone()
	if conn.GetMechanism() == nil {
		for _, m := range request.GetMechanismPreferences() {
			if m.GetType() == kernelmech.MECHANISM {
				conn.Mechanism = m.Clone()
				break
			}
		}
	}
	kernelmech.ToMechanism(conn.GetMechanism()).SetNetNSURL(e.netnsURL)
	return conn, nil
}

func (*kernelEndpoint) Close(context.Context, *networkservice.Connection, ...grpc.CallOption) (*empty.Empty, error) {
	return &empty.Empty{}, nil
}

// movingForwarder is the part of the forwarder's chain that a move goes
// through: the server elements up to requestScope, then mover, mechanism
// translation, the kernel mechanism and v toward an endpoint in nse. With
// reap, begin and the reaper's elements are where New puts them.
func movingForwarder(v *vethClient, mover *movingClient, nse *testutil.NetNS, reap *reaper.Reaper) networkservice.NetworkServiceServer {
	return movingForwarderTo(v, mover, &kernelEndpoint{netnsURL: "file://" + nse.Path()}, reap)
}

// movingForwarderTo is movingForwarder toward ep, whose namespace a test
// may change between requests (the endpoint's pod replaced).
func movingForwarderTo(v *vethClient, mover *movingClient, ep *kernelEndpoint, reap *reaper.Reaper) networkservice.NetworkServiceServer {
	servers := []networkservice.NetworkServiceServer{metadata.NewServer()}
	clients := []networkservice.NetworkServiceClient{metadata.NewClient(), mover, mechanismtranslation.NewClient(), kernel.NewClient(), v}
	if reap != nil {
		servers = []networkservice.NetworkServiceServer{begin.NewServer(), metadata.NewServer(), reap.NewServer()}
		clients = append(clients, reaper.NewClient())
	}
	clients = append(clients, ep)
	servers = append(servers, stashServer{}, requestScope{}, adapters.NewClientToServer(chain.NewNetworkServiceClient(clients...)))
	return chain.NewNetworkServiceServer(servers...)
}

// moveRequest is an NSC's request of connection conn-1 with interface
// nsm0 in nsc.
func moveRequest(nsc *testutil.NetNS) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "conn-1", NetworkService: "svc", Mechanism: kernelMechanism("file://"+nsc.Path(), "nsm0"),
	}}
}

// TestVethKeptWhenTheEndpointMoves: the endpoint restarted in its namespace
// and listens on a new URL; the dial client closes the connection toward
// the old URL within the NSC's Request and requests through the new one,
// without the mechanism it had (mechanism translation forgot it). The
// pair is kept, both ends with their indexes, and the endpoint is asked for
// the interface name it had. A Close from the NSC removes the pair.
func TestVethKeptWhenTheEndpointMoves(t *testing.T) {
	nsc := testutil.NewNetNS(t, "mc")
	nse := testutil.NewNetNS(t, "me")
	v := newVethClient()
	mover := &movingClient{}
	fwd := movingForwarder(v, mover, nse, nil)
	ctx := context.Background()
	request := moveRequest(nsc)

	_, err := fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	p, ok := v.pairs.get("conn-1")
	require.True(t, ok)
	nseName := p.nseName
	nscIndex, nseIndex := index(t, nsc, "nsm0"), index(t, nse, nseName)
	require.NotZero(t, nscIndex)
	require.NotZero(t, nseIndex)

	mover.move = true
	_, err = fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "the NSC's end is kept")
	require.Equal(t, nseIndex, index(t, nse, nseName), "the endpoint's end is kept, under its name")
	require.Equal(t, []string{nseName}, vethsIn(t, nse), "the kept end only, no second pair")

	mover.move = false
	_, err = fwd.Close(ctx, request.GetConnection().Clone())
	require.NoError(t, err)
	require.Zero(t, index(t, nsc, "nsm0"), "a Close from the NSC removes the pair")
	require.Zero(t, index(t, nse, nseName))
}

// TestMovedConnectionReapedWithItsPod: the reaper and the move together.
// An endpoint that moves to a new URL in its own namespace is not judged
// gone: sweeps after the move keep the pair. When the endpoint's pod then
// goes (its namespace's mount gone, nothing running in it), the reaper's
// Close, which comes through begin and not within a Request, removes the
// pair as any other Close does.
func TestMovedConnectionReapedWithItsPod(t *testing.T) {
	nsc := testutil.NewNetNS(t, "mrc")
	nse := testutil.NewNetNS(t, "mre")
	reap := reaper.New()
	v := newVethClient()
	defer v.remove("conn-1")
	mover := &movingClient{}
	fwd := movingForwarder(v, mover, nse, reap)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	request := moveRequest(nsc)
	_, err := fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	p, ok := v.pairs.get("conn-1")
	require.True(t, ok)
	nseName := p.nseName
	nscIndex := index(t, nsc, "nsm0")
	require.NotZero(t, nscIndex)
	reap.Sweep(ctx) // both ends seen alive

	mover.move = true
	_, err = fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "a move is not a dead pod: the pair is kept")
	require.NotZero(t, index(t, nse, nseName))

	nse.Remove(t)
	reap.Sweep(ctx)
	reap.Sweep(ctx)
	require.Zero(t, index(t, nsc, "nsm0"), "the reaper's Close after a move removes the pair")
}

// vethsIn lists the names of the veths in ns.
func vethsIn(t *testing.T, ns *testutil.NetNS) []string {
	t.Helper()
	var out []string
	for _, l := range ns.Links(t) {
		if _, ok := l.(*netlink.Veth); ok {
			out = append(out, l.Attrs().Name)
		}
	}
	return out
}

// TestMoveToANewPodReplacesThePair: the endpoint's pod is replaced (a new
// namespace) and the NSC's connection moves to the new pod's URL within
// its Request, as a move in the same namespace does. The pair kept through
// the move's Close must not stay in the old pod's namespace: the Request
// that follows replaces it, the NSC's end joined to an end in the new
// namespace, and nothing left in the old one. A move back within the new
// namespace keeps that pair.
func TestMoveToANewPodReplacesThePair(t *testing.T) {
	nsc := testutil.NewNetNS(t, "pc")
	oldNS := testutil.NewNetNS(t, "po")
	newNS := testutil.NewNetNS(t, "pn")
	v := newVethClient()
	defer v.remove("conn-1")
	mover := &movingClient{}
	ep := &kernelEndpoint{netnsURL: "file://" + oldNS.Path()}
	fwd := movingForwarderTo(v, mover, ep, nil)
	ctx := context.Background()
	request := moveRequest(nsc)
	_, err := fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	p, ok := v.pairs.get("conn-1")
	require.True(t, ok)
	nseName := p.nseName
	require.Equal(t, []string{nseName}, vethsIn(t, oldNS))

	mover.move = true
	ep.netnsURL = "file://" + newNS.Path()
	_, err = fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	require.Empty(t, vethsIn(t, oldNS), "nothing is left in the old pod's namespace")
	require.Equal(t, []string{nseName}, vethsIn(t, newNS), "the endpoint's end is in the new pod's namespace, under its name")
	nscEnd, err := linkIn(nsc.Handle, "nsm0")
	require.NoError(t, err)
	require.Equal(t, newNS.LinkIndex(t, nseName), nscEnd.Attrs().ParentIndex, "the NSC's end is joined to it")
	nseIndex := newNS.LinkIndex(t, nseName)
	nscIndex := nscEnd.Attrs().Index

	_, err = fwd.Request(ctx, request.Clone())
	require.NoError(t, err)
	require.Equal(t, nscIndex, index(t, nsc, "nsm0"), "a move within the new pod's namespace keeps the pair")
	require.Equal(t, nseIndex, newNS.LinkIndex(t, nseName))
}
