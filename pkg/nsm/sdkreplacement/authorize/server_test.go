package authorize_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	sdkauthorize "github.com/networkservicemesh/sdk/pkg/networkservice/common/authorize"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/count"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// serverBed is the element with a counter after it and a JSON log.
type serverBed struct {
	chain networkservice.NetworkServiceServer
	next  *count.Server
	log   *testutil.JSONLog
}

func newServerBed(opts ...authorize.Option) *serverBed {
	b := &serverBed{next: &count.Server{}, log: &testutil.JSONLog{}}
	opts = append([]authorize.Option{authorize.WithLogger(slog.New(slog.NewJSONHandler(b.log, nil)))}, opts...)
	b.chain = chain.NewNetworkServiceServer(authorize.NewServer(opts...), b.next)
	return b
}

func request(p *networkservice.Path) *networkservice.NetworkServiceRequest {
	return &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "c", Path: p}}
}

// TestServerRefusalStopsTheChain: a refused Request or Close does not reach
// the rest of the chain, is a PermissionDenied naming the policy, and is
// logged with the policy and the caller's ID.
func TestServerRefusalStopsTheChain(t *testing.T) {
	w := newIDs(t)
	hour := time.Now().Add(time.Hour)
	b := newServerBed()
	ctx := peer.NewContext(context.Background(), tlsPeer(w.other.cert))
	p := path(1, w.nsmgr.token(t, w.nse.id, hour), w.nse.token(t, w.nsmgr.id, hour))

	_, err := b.chain.Request(ctx, request(p))
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.Contains(t, err.Error(), "prev_token_signed")
	_, err = b.chain.Close(ctx, request(p).GetConnection())
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.Equal(t, 0, b.next.Requests()+b.next.Closes(), "nothing refused reaches the chain")
	line, _ := b.log.Find(0, "NSM authorization refused", "op", "request", "policy", "prev_token_signed", "peer", w.other.id)
	require.NotNil(t, line, "the refusal is logged: %s", b.log)

	ctx = peer.NewContext(context.Background(), tlsPeer(w.nsmgr.cert))
	_, err = b.chain.Request(ctx, request(p))
	require.NoError(t, err)
	_, err = b.chain.Close(ctx, request(p).GetConnection())
	require.NoError(t, err)
	require.Equal(t, 1, b.next.Requests())
	require.Equal(t, 1, b.next.Closes())
}

// TestServerRefusesABadIndex: a path index at or beyond the path's end, or
// with no segment before ours, is refused, in a Request and a Close (the
// SDK's server panics on the first, and on the second in a Close).
func TestServerRefusesABadIndex(t *testing.T) {
	w := newIDs(t)
	hour := time.Now().Add(time.Hour)
	b := newServerBed()
	ctx := peer.NewContext(context.Background(), tlsPeer(w.nsmgr.cert))
	tok := w.nsmgr.token(t, w.nse.id, hour)
	for _, p := range []*networkservice.Path{path(1, tok), path(5, tok), path(0, tok), path(0), nil} {
		_, err := b.chain.Request(ctx, request(p))
		require.Equal(t, codes.PermissionDenied, status.Code(err), "%v: %v", p, err)
		_, err = b.chain.Close(ctx, request(p).GetConnection())
		require.Equal(t, codes.PermissionDenied, status.Code(err), "Close %v: %v", p, err)
	}
	require.Equal(t, 0, b.next.Requests()+b.next.Closes())

	sdk := sdkauthorize.NewServer()
	err := sdkCall(func() error { _, err := sdk.Close(ctx, request(path(0, tok)).GetConnection()); return err })
	require.Equal(t, "panics", sdkOutcome(err), "the SDK's Close with no segment before ours: %v", err)
	err = sdkCall(func() error { _, err := sdk.Request(ctx, request(path(1, tok))); return err })
	require.Equal(t, "panics", sdkOutcome(err), "the SDK's Request with an index beyond the path: %v", err)
}

// TestServerTokensExpireWithTheClock: a token that was valid is refused
// once the clock passes its exp.
func TestServerTokensExpireWithTheClock(t *testing.T) {
	w := newIDs(t)
	fake := clock.NewFake(time.Now())
	b := newServerBed(authorize.WithClock(fake))
	ctx := peer.NewContext(context.Background(), tlsPeer(w.nsmgr.cert))
	exp := fake.Now().Add(time.Minute)
	p := path(1, w.nsmgr.token(t, w.nse.id, exp), w.nse.token(t, w.nsmgr.id, exp))
	_, err := b.chain.Request(ctx, request(p))
	require.NoError(t, err)
	fake.Advance(2 * time.Minute)
	_, err = b.chain.Request(ctx, request(p))
	require.Equal(t, codes.PermissionDenied, status.Code(err))
	require.Contains(t, err.Error(), "tokens_expired")
}

// TestServerChecksOnlyPeers: an in-process call (no gRPC peer) and any call
// with Any pass unchecked.
func TestServerChecksOnlyPeers(t *testing.T) {
	bad := path(1, "opaque", "opaque")
	b := newServerBed()
	_, err := b.chain.Request(context.Background(), request(bad))
	require.NoError(t, err)
	unchecked := newServerBed(authorize.Any())
	_, err = unchecked.chain.Request(peer.NewContext(context.Background(), tlsPeer(nil)), request(bad))
	require.NoError(t, err)
	require.Equal(t, 0, unchecked.log.Count("NSM authorization refused"))
}
