package forwarder

import (
	"context"
	"net"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	vxlanmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/vxlan"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
)

// nscMechanismKey is the server metadata key under which the NSC side's
// kernel mechanism is kept for the veth and VXLAN client elements;
// nscTunnelKey the one under which a VXLAN mechanism from another node's
// forwarder is kept.
type (
	nscMechanismKey struct{}
	nscTunnelKey    struct{}
)

// stashServer records the NSC side's mechanism in the connection's server
// metadata: a kernel mechanism (already turned into a local file:// netns
// URL by recvfd), or the VXLAN mechanism of a connection that comes from
// another node (with this node's end and the VNI already set by the vni
// server). The forwarder's client chain shares that metadata, so the veth
// and VXLAN elements can see both sides at once.
type stashServer struct{}

func (stashServer) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	if mech := kernelmech.ToMechanism(request.GetConnection().GetMechanism()); mech != nil {
		metadata.Map(ctx, false).Store(nscMechanismKey{}, end{netnsURL: mech.GetNetNSURL(), name: mech.GetInterfaceName()})
	}
	if mech := vxlanmech.ToMechanism(request.GetConnection().GetMechanism()); mech != nil {
		// This node is the tunnel's destination, the other its source.
		metadata.Map(ctx, false).Store(nscTunnelKey{}, tunnelParams{
			local: mech.DstIP(), remote: mech.SrcIP(), vni: mech.VNI(), port: mech.DstPort(), peerPort: mech.SrcPort(),
		})
	}
	return next.Server(ctx).Request(ctx, request)
}

func (stashServer) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}

// NewStashServer returns the element that records the NSC side's kernel
// mechanism (ServerElements has one); a test's forwarder that plays the
// kernel itself uses it with NSCInterfaceName.
func NewStashServer() networkservice.NetworkServiceServer { return stashServer{} }

// NSCInterfaceName is, in the forwarder's client chain, the NSC side's
// interface name that the stash element recorded ("" when none).
func NSCInterfaceName(ctx context.Context) string {
	e, _ := loadNSCEnd(ctx)
	return e.name
}

// end is one side of a veth pair as its kernel mechanism describes it.
type end struct {
	netnsURL string
	name     string
	ips      []net.IP // the connection's addresses at this end, when known
}

// loadNSCEnd returns the kernel NSC side stashServer stored, if any.
func loadNSCEnd(ctx context.Context) (end, bool) { return loadStashed[end](ctx, nscMechanismKey{}) }

// loadNSCTunnel returns the VXLAN side stashServer stored, if any.
func loadNSCTunnel(ctx context.Context) (tunnelParams, bool) {
	return loadStashed[tunnelParams](ctx, nscTunnelKey{})
}

func loadStashed[T any](ctx context.Context, key any) (T, bool) {
	v, _ := metadata.Map(ctx, false).Load(key)
	t, ok := v.(T)
	return t, ok
}
