package nsmsandbox

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk-kernel/pkg/kernel/networkservice/connectioncontextkernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/chains/nsmgr"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/recvfd"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/null"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/nsm/dumpretry"
)

// NewVethDomain builds a one-node sandbox on unix sockets whose forwarder
// really connects the two sides: it creates a veth pair with one end in the
// client's namespace and the other in the endpoint's (named and placed as
// the kernel mechanisms say), and programs the IP context on both ends with
// sdk-kernel. Needs root.
func NewVethDomain(ctx context.Context, t *testing.T) *sandbox.Domain {
	t.Helper()
	return sandbox.NewBuilder(ctx, t).
		UseUnixSockets().
		SetNodeSetup(func(ctx context.Context, node *sandbox.Node, _ int) {
			node.NewNSMgr(ctx, sandbox.UniqueName("nsmgr"), nil, sandbox.GenerateTestToken, nsmgr.NewServer)
			node.NewForwarder(ctx, &registryapi.NetworkServiceEndpoint{
				Name:                sandbox.UniqueName("vethfwd"),
				NetworkServiceNames: []string{"forwarder"},
				NetworkServiceLabels: map[string]*registryapi.NetworkServiceLabels{
					"forwarder": {Labels: map[string]string{"p2p": "true"}},
				},
			}, sandbox.GenerateTestToken,
				sandbox.WithForwarderAdditionalFunctionalityServer(
					dumpretry.NewServer(), // an interrupted netlink dump is retried, not failed
					recvfd.NewServer(),
					mechanisms.NewServer(map[string]networkservice.NetworkServiceServer{kernelmech.MECHANISM: null.NewServer()}),
					connectioncontextkernel.NewServer(),
					&clientSideStash{},
				),
				sandbox.WithForwarderAdditionalFunctionalityClient(
					kernel.NewClient(),
					connectioncontextkernel.NewClient(),
					&vethClient{},
					recvfd.NewClient(),
				),
			)
		}).
		Build()
}

// InNetNS returns an element that places the kernel interface of its side
// in the namespace at path (the SDK's kernel elements name the caller's
// own namespace, and everything here runs in one process). Put it after
// the kernel mechanism element of a client or an endpoint.
func InNetNS(path string) *NetNSSetter {
	return &NetNSSetter{url: (&url.URL{Scheme: "file", Path: path}).String()}
}

// NetNSSetter is the element returned by InNetNS; it is both a client and
// a server element.
type NetNSSetter struct{ url string }

func (s *NetNSSetter) set(params map[string]string) {
	if params != nil {
		params[kernelmech.NetNSURL] = s.url
	}
}

// Request (server side) rewrites the selected mechanism.
func (s *NetNSSetter) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	if m := r.GetConnection().GetMechanism(); m.GetType() == kernelmech.MECHANISM {
		s.set(m.GetParameters())
	}
	return next.Server(ctx).Request(ctx, r)
}

// Close passes on.
func (s *NetNSSetter) Close(ctx context.Context, c *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, c)
}

// Client returns the client-side form, which rewrites the offered
// mechanisms.
func (s *NetNSSetter) Client() networkservice.NetworkServiceClient { return netnsClient{s} }

type netnsClient struct{ s *NetNSSetter }

func (c netnsClient) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	for _, m := range r.GetMechanismPreferences() {
		if m.GetType() == kernelmech.MECHANISM {
			c.s.set(m.GetParameters())
		}
	}
	if m := r.GetConnection().GetMechanism(); m.GetType() == kernelmech.MECHANISM {
		c.s.set(m.GetParameters())
	}
	return next.Client(ctx).Request(ctx, r, opts...)
}

func (c netnsClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}

type stashKey struct{}

// clientSideStash keeps the client side's mechanism for the veth client
// (the forwarder's inner client chain shares the server's metadata).
type clientSideStash struct{}

func (*clientSideStash) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	metadata.Map(ctx, false).Store(stashKey{}, r.GetConnection().GetMechanism().Clone())
	return next.Server(ctx).Request(ctx, r)
}

func (*clientSideStash) Close(ctx context.Context, c *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, c)
}

type vethKey struct{}

// veth is a created pair: the endpoint-side end, by namespace and name.
type veth struct {
	ns   netns.NsHandle
	name string
}

// vethClient creates the veth pair once the endpoint has accepted, and
// deletes it on Close.
type vethClient struct{}

func nsFromURL(u string) (netns.NsHandle, error) {
	if !strings.HasPrefix(u, "file://") {
		return -1, fmt.Errorf("netns url %q is not a file url", u)
	}
	return netns.GetFromPath(strings.TrimPrefix(u, "file://"))
}

func (*vethClient) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, r, opts...)
	if err != nil {
		return nil, err
	}
	if _, ok := metadata.Map(ctx, true).Load(vethKey{}); ok {
		return conn, nil // a refresh
	}
	v, _ := metadata.Map(ctx, false).Load(stashKey{})
	client := kernelmech.ToMechanism(v.(*networkservice.Mechanism))
	server := kernelmech.ToMechanism(conn.GetMechanism())
	if client == nil || server == nil {
		return nil, fmt.Errorf("vethfwd: both sides must use the kernel mechanism")
	}
	created, err := createVeth(client.GetNetNSURL(), client.GetInterfaceName(), server.GetNetNSURL(), server.GetInterfaceName())
	if err != nil {
		return nil, err
	}
	metadata.Map(ctx, true).Store(vethKey{}, created)
	return conn, nil
}

func (*vethClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	if v, ok := metadata.Map(ctx, true).LoadAndDelete(vethKey{}); ok {
		created := v.(*veth)
		if h, err := netlink.NewHandleAt(created.ns); err == nil {
			if l, err := h.LinkByName(created.name); err == nil {
				_ = h.LinkDel(l)
			}
			h.Close()
		}
		_ = created.ns.Close()
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}

func createVeth(clientNS, clientName, serverNS, serverName string) (*veth, error) {
	cns, err := nsFromURL(clientNS)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cns.Close() }()
	sns, err := nsFromURL(serverNS)
	if err != nil {
		return nil, err
	}
	la := netlink.NewLinkAttrs()
	la.Name = clientName
	la.Namespace = netlink.NsFd(cns)
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: la, PeerName: serverName, PeerNamespace: netlink.NsFd(sns)}); err != nil {
		_ = sns.Close()
		return nil, fmt.Errorf("vethfwd: add veth %s/%s: %w", clientName, serverName, err)
	}
	for _, end := range []struct {
		ns   netns.NsHandle
		name string
	}{{cns, clientName}, {sns, serverName}} {
		if err := setUp(end.ns, end.name); err != nil {
			_ = sns.Close()
			return nil, err
		}
	}
	return &veth{ns: sns, name: serverName}, nil
}

func setUp(ns netns.NsHandle, name string) error {
	h, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("vethfwd: netlink handle: %w", err)
	}
	defer h.Close()
	l, err := h.LinkByName(name)
	if err != nil {
		return fmt.Errorf("vethfwd: find %s: %w", name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("vethfwd: set %s up: %w", name, err)
	}
	return nil
}
