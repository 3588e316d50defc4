package ipcontext_test

import (
	"context"
	"errors"
	"net/netip"
	"sync/atomic"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext/ipcontextfake"
	"github.com/causeway-net/causeway/pkg/proxy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// tail is the rest of the chain: it checks that the IP context arrived and
// can be told to fail.
type tail struct {
	fail    atomic.Bool
	sawAddr atomic.Bool
}

func (t *tail) handle(conn *networkservice.Connection) error {
	if len(conn.GetContext().GetIpContext().GetSrcIpAddrs()) > 0 {
		t.sawAddr.Store(true)
	}
	if t.fail.Load() {
		return errors.New("downstream failure")
	}
	return nil
}

func (t *tail) Request(_ context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	if err := t.handle(r.GetConnection()); err != nil {
		return nil, err
	}
	return r.GetConnection(), nil
}

func (t *tail) Close(context.Context, *networkservice.Connection) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

type tailClient struct{ *tail }

func (t tailClient) Request(_ context.Context, r *networkservice.NetworkServiceRequest, _ ...grpc.CallOption) (*networkservice.Connection, error) {
	if err := t.handle(r.GetConnection()); err != nil {
		return nil, err
	}
	return r.GetConnection(), nil
}

func (t tailClient) Close(context.Context, *networkservice.Connection, ...grpc.CallOption) (*emptypb.Empty, error) {
	return &emptypb.Empty{}, nil
}

// side abstracts over the server and the client chain.
type side struct {
	name    string
	kind    proxy.ConnType
	request func(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error)
	close   func(ctx context.Context, c *networkservice.Connection) error
}

func sides(setter *ipcontextfake.Setter, tl *tail) []side {
	srv := chain.NewNetworkServiceServer(metadata.NewServer(), ipcontext.NewServer(setter), tl)
	cli := chain.NewNetworkServiceClient(metadata.NewClient(), ipcontext.NewClient(setter), tailClient{tl})
	return []side{
		{
			name: "server", kind: proxy.TargetConn,
			request: srv.Request,
			close: func(ctx context.Context, c *networkservice.Connection) error {
				_, err := srv.Close(ctx, c)
				return err
			},
		},
		{
			name: "client", kind: proxy.LBConn,
			request: func(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
				return cli.Request(ctx, r)
			},
			close: func(ctx context.Context, c *networkservice.Connection) error {
				_, err := cli.Close(ctx, c)
				return err
			},
		},
	}
}

// eachSide runs test on the server and on the client chain, each with a
// fresh tail and setter (failing with setErr when not nil) that hands out
// 172.16.0.2/24 first.
func eachSide(t *testing.T, setErr error, test func(t *testing.T, s side, setter *ipcontextfake.Setter, tl *tail)) {
	for i := range 2 {
		setter, tl := &ipcontextfake.Setter{Subnet: netip.MustParsePrefix("172.16.0.0/24"), First: 2, Err: setErr}, &tail{}
		s := sides(setter, tl)[i]
		setter.Type = s.kind
		t.Run(s.name, func(t *testing.T) { test(t, s, setter, tl) })
	}
}

func newRequest(id string) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: id}}
}

func TestRequestSetsBeforeNextAndCloseUnsets(t *testing.T) {
	eachSide(t, nil, func(t *testing.T, s side, setter *ipcontextfake.Setter, tl *tail) {
		ctx := context.Background()
		conn, err := s.request(ctx, newRequest("c1"))
		require.NoError(t, err)
		require.True(t, tl.sawAddr.Load(), "addresses must be set before the request goes on")
		require.Equal(t, []string{"172.16.0.2/24"}, conn.GetContext().GetIpContext().GetSrcIpAddrs())

		// A refresh sets again and does not release.
		_, err = s.request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
		require.NoError(t, err)
		require.NoError(t, s.close(ctx, conn))
		require.Equal(t, []string{"set", "set", "unset"}, setter.Ops())
		for _, c := range setter.Calls() {
			require.Equal(t, s.kind, c.Type)
			require.Equal(t, "c1", c.ID)
		}
	})
}

func TestFailedNewRequestReleases(t *testing.T) {
	eachSide(t, nil, func(t *testing.T, s side, setter *ipcontextfake.Setter, tl *tail) {
		tl.fail.Store(true)
		_, err := s.request(context.Background(), newRequest("c1"))
		require.Error(t, err)
		require.Equal(t, []string{"set", "unset"}, setter.Ops())
	})
}

func TestFailedRefreshKeepsAddresses(t *testing.T) {
	eachSide(t, nil, func(t *testing.T, s side, setter *ipcontextfake.Setter, tl *tail) {
		ctx := context.Background()
		conn, err := s.request(ctx, newRequest("c1"))
		require.NoError(t, err)
		tl.fail.Store(true)
		_, err = s.request(ctx, &networkservice.NetworkServiceRequest{Connection: conn})
		require.Error(t, err)
		require.Equal(t, []string{"set", "set"}, setter.Ops())
	})
}

func TestSetterFailureOnNewConnectionReleases(t *testing.T) {
	eachSide(t, errors.New("ipam down"), func(t *testing.T, s side, setter *ipcontextfake.Setter, tl *tail) {
		_, err := s.request(context.Background(), newRequest("c1"))
		require.ErrorContains(t, err, "ipam down")
		require.False(t, tl.sawAddr.Load(), "the request must not go on without addresses")
		require.Equal(t, []string{"set", "unset"}, setter.Ops())
	})
}

// The proxy is the Setter the elements are built for.
var _ ipcontext.Setter = (*proxy.Proxy)(nil)
