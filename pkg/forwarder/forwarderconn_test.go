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
// translation, the kernel mechanism and v toward ep, whose namespace a test
// may change between requests (the endpoint's pod replaced). With reap,
// begin and the reaper's elements are where New puts them.
func movingForwarder(v *vethClient, mover *movingClient, ep *kernelEndpoint, reap *reaper.Reaper) networkservice.NetworkServiceServer {
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

// forwarderConn is an NSC's connection conn-1, with interface nsm0 in nsc,
// established through movingForwarder toward an endpoint in nse; nseName
// is the name of the pair's end there.
type forwarderConn struct {
	ctx      context.Context
	nsc, nse *testutil.NetNS
	v        *vethClient
	mover    *movingClient
	ep       *kernelEndpoint
	fwd      networkservice.NetworkServiceServer
	nseName  string
}

// establish makes the namespaces (named prefix and "c" or "e") and
// requests the connection, with reap's elements in the chain when reap is
// not nil. The pair goes when the test ends.
func establish(t *testing.T, prefix string, reap *reaper.Reaper) *forwarderConn {
	t.Helper()
	m := &forwarderConn{
		nsc: testutil.NewNetNS(t, prefix+"c"), nse: testutil.NewNetNS(t, prefix+"e"),
		v: newVethClient(), mover: &movingClient{},
	}
	t.Cleanup(func() { m.v.remove("conn-1") })
	var cancel context.CancelFunc
	m.ctx, cancel = context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	m.ep = &kernelEndpoint{netnsURL: "file://" + m.nse.Path()}
	m.fwd = movingForwarder(m.v, m.mover, m.ep, reap)
	m.request(t, false)
	p, ok := m.v.pairs.get("conn-1")
	require.True(t, ok)
	m.nseName = p.nseName
	return m
}

// request is the NSC's Request of the connection (again); with move, the
// dial client moves it to the endpoint's new URL within the Request.
func (m *forwarderConn) request(t *testing.T, move bool) {
	t.Helper()
	m.mover.move = move
	_, err := m.fwd.Request(m.ctx, &networkservice.NetworkServiceRequest{Connection: m.conn()})
	require.NoError(t, err)
}

// conn is the NSC's connection as it asks for it.
func (m *forwarderConn) conn() *networkservice.Connection {
	return &networkservice.Connection{
		Id: "conn-1", NetworkService: "svc", Mechanism: kernelMechanism("file://"+m.nsc.Path(), "nsm0"),
	}
}

func kernelMechanism(netnsURL, name string) *networkservice.Mechanism {
	m := kernelmech.New(netnsURL)
	m.GetParameters()[kernelmech.InterfaceNameKey] = name
	return m
}
