package keepmechanism

import (
	"context"
	"slices"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
)

type mechanismKey struct{}

type server struct{}

// NewServer returns the element.
func NewServer() networkservice.NetworkServiceServer { return &server{} }

func (s *server) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	md := metadata.Map(ctx, false)
	conn := request.GetConnection()
	if v, ok := md.Load(mechanismKey{}); ok && conn != nil && conn.GetMechanism() == nil {
		if kept := v.(*networkservice.Mechanism); offered(request, kept.GetType()) {
			conn.Mechanism = kept.Clone()
		}
	}
	resp, err := next.Server(ctx).Request(ctx, request)
	if err != nil {
		return nil, err
	}
	if m := resp.GetMechanism(); m != nil {
		md.Store(mechanismKey{}, m.Clone())
	}
	return resp, nil
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	metadata.Map(ctx, false).Delete(mechanismKey{})
	return next.Server(ctx).Close(ctx, conn)
}

// offered reports whether the request still prefers a mechanism of typ (a
// request without preferences accepts any).
func offered(request *networkservice.NetworkServiceRequest, typ string) bool {
	prefs := request.GetMechanismPreferences()
	return len(prefs) == 0 || slices.ContainsFunc(prefs, func(m *networkservice.Mechanism) bool { return m.GetType() == typ })
}
