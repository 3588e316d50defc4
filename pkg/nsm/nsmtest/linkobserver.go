package nsmtest

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/forwarder"
)

// LinkChange is what a kernel forwarder does for one connection: once the
// endpoint has accepted it creates an interface in the client's namespace
// (ClientIfName) and one in the endpoint's (EndpointIfName); when the
// connection is closed it deletes them (Deleted).
type LinkChange struct {
	// Client is the name of the first path segment (the requesting
	// client), Endpoint the endpoint's name.
	Client, Endpoint string
	// ClientIfName and EndpointIfName are the kernel interface names the
	// two sides' kernel mechanisms carry.
	ClientIfName, EndpointIfName string
	Deleted                      bool
}

type observedKey struct{}

// linkObserver reports LinkChanges from the forwarder's client chain: its
// metadata is shared with the server side, where the veth forwarder's stash
// element keeps the client's mechanism.
type linkObserver struct{ report func(LinkChange) }

func (l *linkObserver) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, r, opts...)
	if err != nil {
		return nil, err
	}
	if _, ok := metadata.Map(ctx, true).Load(observedKey{}); ok {
		return conn, nil // a refresh
	}
	ch := LinkChange{
		Endpoint:       conn.GetNetworkServiceEndpointName(),
		ClientIfName:   forwarder.NSCInterfaceName(ctx),
		EndpointIfName: kernelmech.ToMechanism(conn.GetMechanism()).GetInterfaceName(),
	}
	if segs := conn.GetPath().GetPathSegments(); len(segs) > 0 {
		ch.Client = segs[0].GetName()
	}
	metadata.Map(ctx, true).Store(observedKey{}, ch)
	l.report(ch)
	return conn, nil
}

func (l *linkObserver) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	if v, ok := metadata.Map(ctx, true).LoadAndDelete(observedKey{}); ok {
		ch := v.(LinkChange)
		ch.Deleted = true
		l.report(ch)
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}
