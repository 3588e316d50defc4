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

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
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
		if p, ok := o.(grpc.PeerCallOption); ok && a.peer != nil {
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
	nextClaims := map[string]any{"sub": w.nsmgr.id, "aud": []string{w.nse.id}, "exp": hour.Unix()}
	for _, tc := range []struct {
		name    string
		path    *networkservice.Path
		peer    *peer.Peer // the call's peer (nil: the call fills none)
		ctxPeer *peer.Peer // the peer of the Request's context, if any
		want    string
		sdk     string // the SDK's outcome where it differs, and why
		why     string
	}{
		{name: "signed by the server", path: path(0, good()...), peer: tlsPeer(w.nsmgr.cert)},
		{name: "the next token signed by a stranger", path: path(0, good()...), peer: tlsPeer(w.other.cert), want: "next_token_signed"},
		{name: "no next segment", path: path(0, good()[0]), peer: tlsPeer(w.nsmgr.cert), want: "next_token_signed"},
		{name: "the chain broken", path: path(0, w.nsc.token(t, w.other.id, hour), good()[1], good()[2]), peer: tlsPeer(w.nsmgr.cert),
			want: "tokens_chained"},
		{name: "the last token expired", path: path(0, good()[0], good()[1], w.nse.token(t, w.nsmgr.id, time.Now().Add(-time.Second))),
			peer: tlsPeer(w.nsmgr.cert), want: "tokens_expired"},
		{name: "the next token's alg is a number", path: path(0, good()[0], jwt(t, `{"alg":5}`, nextClaims, w.nsmgr.key), good()[2]),
			peer: tlsPeer(w.nsmgr.cert), want: "next_token_signed"},
		{name: "the next token's crit is not a list", path: path(0, good()[0], jwt(t, `{"alg":"ES256","crit":"b"}`, nextClaims, w.nsmgr.key), good()[2]),
			peer: tlsPeer(w.nsmgr.cert), want: "next_token_signed"},
		{name: "the next token's signature padded with one =", path: path(0, good()[0], good()[1]+"=", good()[2]),
			peer: tlsPeer(w.nsmgr.cert), want: "tokens_chained"},
		{name: "the server's peer only in the context", path: path(0, good()...), ctxPeer: tlsPeer(w.nsmgr.cert),
			want: "next_token_signed", sdk: "passes", why: "without a call peer the SDK verifies with the context's (here an incoming call's) peer"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			req := &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}}
			ctx := context.Background()
			if tc.ctxPeer != nil {
				ctx = peer.NewContext(ctx, tc.ctxPeer)
			}
			_, err := clientChain(authorize.NewClient(), &answer{path: tc.path, peer: tc.peer}).Request(ctx, req.Clone())
			require.Equal(t, tc.want, decision(err), "ours: %v", err)
			sdkErr := sdkCall(func() error {
				_, err := clientChain(sdkauthorize.NewClient(), &answer{path: tc.path, peer: tc.peer}).Request(ctx, req.Clone())
				return err
			})
			want := "passes"
			if tc.want != "" {
				want = "refused"
			}
			if tc.sdk != "" {
				require.NotEqual(t, want, tc.sdk)
				want = tc.sdk
				t.Logf("the SDK %s: %s", want, tc.why)
			}
			require.Equal(t, want, sdkOutcome(sdkErr), "the SDK: %v", sdkErr)
		})
	}
}

// TestClientClosesWhatTheSDKKeeps: a Close of a connection whose path no
// longer passes (its tokens expired) goes out, where the SDK's client
// refuses it locally and the far end keeps the connection until it expires.
func TestClientClosesWhatTheSDKKeeps(t *testing.T) {
	w := newIDs(t)
	fake := clock.NewFake(time.Now())
	exp := fake.Now().Add(time.Minute)
	p := path(0, w.nsc.token(t, w.nsmgr.id, exp), w.nsmgr.token(t, w.nsc.id, exp))
	for _, tc := range []struct {
		name    string
		element networkservice.NetworkServiceClient
		closes  int
	}{
		{"ours", authorize.NewClient(authorize.WithClock(fake)), 1},
		{"the SDK", sdkauthorize.NewClient(), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := &answer{path: p, peer: tlsPeer(w.nsmgr.cert)}
			c := clientChain(tc.element, a)
			conn, err := c.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c"}})
			require.NoError(t, err)
			expired := conn.Clone()
			expired.Path = path(0, w.nsc.token(t, w.nsmgr.id, time.Now().Add(-time.Second)), w.nsmgr.token(t, w.nsc.id, time.Now().Add(-time.Second)))
			_, err = c.Close(context.Background(), expired)
			require.Equal(t, tc.closes == 0, err != nil, "%v", err)
			require.Equal(t, tc.closes, a.closes)
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
