package forwarder

import (
	"context"
	"net"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/cls"
	vxlanmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/vxlan"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/vxlan/vni"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
)

// DefaultVXLANPort is the IANA VXLAN port, the one NSM's forwarders use.
const DefaultVXLANPort = 4789

// Remote says how the forwarder reaches the forwarders of other nodes. Its
// zero value is a forwarder of one node: it offers and accepts the KERNEL
// mechanism only.
type Remote struct {
	// NodeIP is the node's address on the node network: the source of the
	// VXLAN tunnels this forwarder offers, the destination of those it
	// accepts. Nil: no remote mechanism.
	NodeIP net.IP
	// NodeNetNS is the path of the node's network namespace, where the
	// tunnels' UDP sockets live ("": the forwarder's own, as in a pod on
	// the host network).
	NodeNetNS string
	// Port is the VXLAN UDP port of every node (default DefaultVXLANPort).
	Port uint16
}

// enabled reports whether the forwarder speaks VXLAN.
func (r Remote) enabled() bool { return r.NodeIP != nil }

func (r Remote) port() uint16 {
	if r.Port == 0 {
		return DefaultVXLANPort
	}
	return r.Port
}

// vxlanOfferClient adds a VXLAN preference (class REMOTE) to the
// forwarder's outgoing request, as kernel.NewClient adds a KERNEL one
// (class LOCAL); SDK's vni client then fills in this node's end, and
// filtermechanisms keeps the class that fits the next hop.
type vxlanOfferClient struct{}

func (vxlanOfferClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	offered := false
	for _, m := range request.GetMechanismPreferences() {
		offered = offered || m.GetType() == vxlanmech.MECHANISM
	}
	if !offered {
		request.MechanismPreferences = append(request.GetMechanismPreferences(),
			&networkservice.Mechanism{Cls: cls.REMOTE, Type: vxlanmech.MECHANISM, Parameters: map[string]string{}})
	}
	return next.Client(ctx).Request(ctx, request, opts...)
}

func (vxlanOfferClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// offerClients are the client elements that offer the remote mechanism.
func (r Remote) offerClients() []networkservice.NetworkServiceClient {
	if !r.enabled() {
		return nil
	}
	return []networkservice.NetworkServiceClient{
		vxlanOfferClient{},
		vni.NewClient(r.NodeIP, vni.WithTunnelPort(r.port())),
	}
}

// acceptServer is the mechanisms server's VXLAN entry: SDK's vni server,
// which sets this node as the tunnel's destination and chooses a VNI that
// the two ends agree on (even or odd by the order of their addresses, so
// two nodes never pick the same one for each other).
func (r Remote) acceptServer() networkservice.NetworkServiceServer {
	return vni.NewServer(r.NodeIP, vni.WithTunnelPort(r.port()))
}
