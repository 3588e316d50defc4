package liveness_test

import (
	"context"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/api/pkg/api/networkservice/payload"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
)

// TestSandboxWhoseDown: a client on node 0 with the heal check on node 0's
// NSMgr, which reports the client's connection down in each case; the far
// end's interface answers on the data path or not.
//
//   - remote-nsmgr-restarted: the endpoint on node 1, node 1's NSMgr
//     restarts. Answering, heal re-requests the connection as it is through
//     the new NSMgr and never closes it (before the check took the data
//     path's word for another node's endpoint, a proxy closed its link to an
//     LB that still answered: NSMReplaced on three nodes); silent, the
//     NSMgr is believed and heal reselects, closing it first.
//   - local-endpoint-died: the endpoint on node 0 stops serving. Node 0's
//     NSMgr saw it go itself: heal reselects, closing the connection first,
//     even though its interface still answers (a check that took any
//     answer's word kept a stopped LB's port and nexthop: cmd/proxy
//     TestProxyKernelE2E).
func TestSandboxWhoseDown(t *testing.T) {
	nsmtest.Quiet()
	for _, c := range []struct {
		name           string
		node           int
		answers, keeps bool
	}{
		{"remote-nsmgr-restarted/answering", 1, true, true},
		{"remote-nsmgr-restarted/silent", 1, false, false},
		{"local-endpoint-died/answering", 0, true, false},
	} {
		t.Run(c.name, func(t *testing.T) { testWhoseDown(t, c.node, c.answers, c.keeps) })
	}
}

func testWhoseDown(t *testing.T, node int, answers, keeps bool) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const service = "lb.trench"
	domain := nsmtest.NewNodes(ctx, t, 2, service)
	served := &nsmtest.Served{}
	lb := domain.Nodes[node].NewEndpoint(ctx, &registryapi.NetworkServiceEndpoint{Name: "lb", NetworkServiceNames: []string{service}},
		sandbox.GenerateTestToken, served)

	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(domain.Nodes[0].NSMgr.URL), sandbox.DialOptions()...)
	require.NoError(t, err)
	defer func() { _ = nsmgr.Close() }()
	closed := &nsmtest.Closes{}
	nsc := nsmtest.HealingClient(ctx, domain.Nodes[0].NSMgr.URL, "proxy",
		nsmgr.HealOptions(nil, func(*networkservice.Connection) bool { return answers }), nsmgr.NewClient(), closed)
	conn, err := nsc.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: "proxy-lb", NetworkService: service, NetworkServiceEndpointName: "lb", Payload: payload.Ethernet,
	}})
	require.NoError(t, err)
	require.Equal(t, 1, served.Count())
	// The Close waits for the heal's request in flight and ends the heal.
	defer func() { _, _ = nsc.Close(ctx, conn) }()

	if node == 0 {
		lb.Cancel()
		require.Eventually(t, func() bool { return closed.Of("proxy-lb") > 0 }, 30*time.Second, 10*time.Millisecond,
			"our NSMgr's own endpoint stopped: reselected, closed first")
		// Back, it serves the reselect, and the heal is over before the
		// test ends.
		lb.Restart()
		require.Eventually(t, func() bool { return served.Count() > 1 }, 30*time.Second, 10*time.Millisecond,
			"the reselect served once the endpoint is back")
		return
	}
	domain.Nodes[1].NSMgr.Restart()
	require.Eventually(t, func() bool { return served.Count() > 1 }, 30*time.Second, 10*time.Millisecond,
		"healed through node 1's new NSMgr")
	if keeps {
		require.Zero(t, closed.Of("proxy-lb"), "another node's endpoint answers: re-requested as it is, never closed")
	} else {
		require.Positive(t, closed.Of("proxy-lb"), "the far end is silent: reselected, closed first")
	}
}
