package targetstub

import (
	"context"
	"log/slog"
	"net/netip"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/pkg/lab/pubdir"
)

// publishClient republishes the target's own addresses after every
// successful Request (first request, refresh, heal) and withdraws them on
// Close, so the load balancer stubs always route to what the proxy handed
// out last.
type publishClient struct {
	dir, name string
	vips      []netip.Addr
}

func (p *publishClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil || p.dir == "" {
		return conn, err
	}
	if addrs := ownAddrs(conn, p.vips); len(addrs) > 0 {
		if perr := pubdir.Publish(p.dir, p.name, addrs); perr != nil {
			slog.Warn("publish target addresses", "target", p.name, "error", perr)
		}
	}
	return conn, nil
}

func (p *publishClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	if p.dir != "" {
		if err := pubdir.Withdraw(p.dir, p.name); err != nil {
			slog.Warn("withdraw target addresses", "target", p.name, "error", err)
		}
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}
