package authorize_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	sdkauthorize "github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/pkg/nsm/authorize"
)

// answer is the rest of a client chain: it returns its path as the
// server's answer, fills the call's peer with its peer, and counts Closes.
type answer struct {
	path   *networkservice.Path
	peer   *peer.Peer
	closes int
}

func (a *answer) Request(_ context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	for _, o := range opts {
		if p, ok := o.(grpc.PeerCallOption); ok {
			*p.PeerAddr = *a.peer
		}
	}
	conn := request.GetConnection().Clone()
	conn.Path = a.path
	return conn, nil
}

func (a *answer) Close(context.Context, *networkservice.Connection, ...grpc.CallOption) (*emptypb.Empty, error) {
	a.closes++
	return &emptypb.Empty{}, nil
}

func clientChain(element networkservice.NetworkServiceClient, a *answer) networkservice.NetworkServiceClient {
	return chain.NewNetworkServiceClient(metadata.NewClient(), element, a)
}

// TestClientDecidesAsTheSDK: the client accepts and refuses the answers
// that the SDK's authorize client with its default policies does.
func TestClientDecidesAsTheSDK(t *testing.T) {
	w := newIDs(t)
	hour := time.Now().Add(time.Hour)
	good := func() []string {
		return []string{w.nsc.token(t, w.nsmgr.id, hour), w.nsmgr.token(t, w.nse.id, hour), w.nse.token(t, w.nsmgr.id, hour)}
	}
	for _, tc := range []struct {
		name string
		path *networkservice.Path
		peer *peer.Peer
		want string
	}{
		{"signed by the server", path(0, good()...), tlsPeer(w.nsmgr.cert), ""},
		{"the next token signed by a stranger", path(0, good()...), tlsPeer(w.other.cert), "next_token_signed"},
		{"no next segment", path(0, good()[0]), tlsPeer(w.nsmgr.cert), "next_token_signed"},
		{"the chain broken", path(0, w.nsc.token(t, w.other.id, hour), good()[1], good()[2]), tlsPeer(w.nsmgr.cert), "tokens_chained"},
		{"the last token expired", path(0, good()[0], good()[1], w.nse.token(t, w.nsmgr.id, time.Now().Add(-time.Second))),
			tlsPeer(w.nsmgr.cert), "tokens_expired"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}}
			_, err := clientChain(authorize.NewClient(), &answer{path: tc.path, peer: tc.peer}).Request(context.Background(), req.Clone())
			require.Equal(t, tc.want, decision(err), "ours: %v", err)
			_, sdkErr := clientChain(sdkauthorize.NewClient(), &answer{path: tc.path, peer: tc.peer}).Request(context.Background(), req.Clone())
			want := ""
			if tc.want != "" {
				want = "refused"
			}
			require.Equal(t, want, decision(sdkErr), "the SDK: %v", sdkErr)
		})
	}
}

// TestClientClosesOnlyWhatItRefusedFirst: a refused first Request closes
// the connection it made; a refused refresh of an accepted connection
// leaves it; a Close goes out unchecked.
func TestClientClosesOnlyWhatItRefusedFirst(t *testing.T) {
	w := newIDs(t)
	hour := time.Now().Add(time.Hour)
	good := path(0, w.nsc.token(t, w.nsmgr.id, hour), w.nsmgr.token(t, w.nsc.id, hour))
	a := &answer{path: good, peer: tlsPeer(w.other.cert)}
	c := clientChain(authorize.NewClient(), a)
	req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}}

	_, err := c.Request(context.Background(), req.Clone())
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, 1, a.closes, "the refused connection is closed")

	a.peer = tlsPeer(w.nsmgr.cert)
	conn, err := c.Request(context.Background(), req.Clone())
	require.NoError(t, err)
	a.peer = tlsPeer(w.other.cert)
	_, err = c.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: conn})
	require.Equal(t, codes.PermissionDenied, status.Code(err), "%v", err)
	require.Equal(t, 1, a.closes, "a refused refresh does not close")

	_, err = c.Close(context.Background(), conn)
	require.NoError(t, err, "a Close is not checked")
	require.Equal(t, 2, a.closes)
}

// TestClientAny: Any accepts any answer.
func TestClientAny(t *testing.T) {
	a := &answer{path: path(0, "opaque"), peer: tlsPeer(nil)}
	_, err := clientChain(authorize.NewClient(authorize.Any()), a).Request(context.Background(),
		&networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}})
	require.NoError(t, err)
}
