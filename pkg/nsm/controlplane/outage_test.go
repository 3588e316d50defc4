package controlplane_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/causeway-net/causeway/internal/testutil"
)

// requestCounter counts the requests that reach it and those that succeed.
type requestCounter struct{ n, ok atomic.Int64 }

func (c *requestCounter) Request(ctx context.Context, r *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	c.n.Add(1)
	conn, err := next.Client(ctx).Request(ctx, r, opts...)
	if err == nil {
		c.ok.Add(1)
	}
	return conn, err
}

func (c *requestCounter) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// TestClientPausesWhileNSMIsAway: once the control plane is stopped, the
// client's heal re-requests its connection until the NSMgr is back; each
// failed try is followed by a growing pause (pkg/nsm/chain/backoff), so an outage
// of a few seconds costs a handful of tries, not one per round trip to a
// missing socket (which spun a lab target at half a core). A control plane
// started again is found by the next try.
func TestClientPausesWhileNSMIsAway(t *testing.T) {
	// Short registrations: the NSE refreshes often and is soon known to
	// the control plane started again.
	const nseExpiration = 3 * time.Second
	nscNS := testutil.NewNetNS(t, "nsc")
	nseNS := testutil.NewNetNS(t, "nse")
	tries := &requestCounter{}
	n := startPair(t, nscNS, nseNS, 2*time.Minute, withNSEExpiration(nseExpiration), withClientElements(tries))
	n.request(t)

	const outage = 4 * time.Second
	n.cp.Stop()
	before := tries.n.Load()
	time.Sleep(outage)
	triesDuring := tries.n.Load() - before
	t.Logf("FIGURE: %d requests tried during a %v NSM outage", triesDuring, outage)
	// Pauses of 100 ms, 200 ms, 400 ms, ... fit about six tries into the
	// outage; a heal without pauses makes thousands (about 3,000 a second).
	require.LessOrEqual(t, triesDuring, int64(12), "heal pauses between failed tries while NSM is away (a count of requests)")
	require.Positive(t, triesDuring, "heal tried while NSM was away")

	_, err := linkIn(t, nscNS, "nsm0")
	require.NoError(t, err, "the outage leaves the data path")

	healed := tries.ok.Load()
	n.startControlPlane(t)
	restarted, tried := time.Now(), tries.n.Load()
	require.Eventually(t, func() bool { return tries.ok.Load() > healed }, time.Minute, 100*time.Millisecond,
		"heal re-requests through the control plane started again")
	t.Logf("FIGURE: healed %v after the control plane started again, in %d tries",
		time.Since(restarted).Round(100*time.Millisecond), tries.n.Load()-tried)
}
