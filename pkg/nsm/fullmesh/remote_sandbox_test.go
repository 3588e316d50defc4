package fullmesh_test

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nsm/chain/liveness"
	"github.com/causeway-net/causeway/pkg/nsm/fullmesh"
	"github.com/causeway-net/causeway/pkg/nsm/nsmtest"
)

// TestSandboxRemoteLBs: the proxy on node 0 meshes with two LBs on node 1,
// with the proxy's heal check, and both LBs' interfaces answer on the data
// path throughout (the worst case: a stopped LB's namespace may still
// answer). Node 1's NSMgr restarts: node 0's NSMgr reports both connections
// down, and both are re-requested as they are, never closed nor withdrawn
// (before, the proxy closed them and waited for them to be rebuilt:
// NSMReplaced on three nodes). Then one LB unregisters and stops: the mesh
// withdraws its connection and closes it at once, although it answers and
// the heal keeps trying it; the other is untouched.
func TestSandboxRemoteLBs(t *testing.T) {
	nsmtest.Quiet()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	domain := nsmtest.NewNodes(ctx, t, 2, lbService)
	lbs := map[string]*nsmtest.Conns{}
	served := map[string]*nsmtest.Served{}
	entries := map[string]*sandbox.EndpointEntry{}
	nses := map[string]*registryapi.NetworkServiceEndpoint{}
	for _, name := range []string{"lb-a", "lb-b"} {
		lbs[name], served[name] = &nsmtest.Conns{}, &nsmtest.Served{}
		nses[name] = &registryapi.NetworkServiceEndpoint{Name: name, NetworkServiceNames: []string{lbService}}
		entries[name] = domain.Nodes[1].NewEndpoint(ctx, nses[name], sandbox.GenerateTestToken, served[name], lbs[name])
	}

	nsmgrURL := domain.Nodes[0].NSMgr.URL
	nsmgr, err := liveness.Dial(grpcutils.URLToTarget(nsmgrURL), sandbox.DialOptions()...)
	require.NoError(t, err)
	defer func() { _ = nsmgr.Close() }()
	answering := func(*networkservice.Connection) bool { return true }
	closes := &nsmtest.Closes{}
	pinner := fullmesh.NewPinner()
	nsc := nsmtest.HealingClient(ctx, nsmgrURL, "proxy-a", nsmgr.HealOptions(nil, answering), nsmgr.NewClient(), closes, pinner)
	var withdrawn sync.Map // connection id → time of its withdraw
	var withdraws atomic.Int32
	reg := (&meshBed{nsmgrURL: nsmgrURL}).registry(ctx)
	mesh := fullmesh.New("proxy-a", lbService, nsc, reg,
		fullmesh.WithPinner(pinner),
		fullmesh.WithRetryInterval(100*time.Millisecond),
		fullmesh.WithWatchBackoff(50*time.Millisecond, 500*time.Millisecond),
		fullmesh.WithWithdraw(func(c *networkservice.Connection) {
			withdraws.Add(1)
			withdrawn.Store(c.GetId(), time.Now())
		}),
		fullmesh.WithLogger(slog.New(slog.NewTextHandler(io.Discard, nil))),
	)
	stopMesh := runMesh(ctx, mesh)
	defer func() { _ = stopMesh() }()

	const wait, tick = 30 * time.Second, 20 * time.Millisecond
	require.Eventually(t, func() bool {
		return len(mesh.Connections()) == 2 && lbs["lb-a"].Count() == 1 && lbs["lb-b"].Count() == 1
	}, wait, tick, "both LBs of node 1 joined")
	conns := mesh.Connections()
	require.Greater(t, len(conns["lb-a"].GetPath().GetPathSegments()), 4, "the path runs through both nodes' NSMgrs")

	before := map[string]int{"lb-a": served["lb-a"].Count(), "lb-b": served["lb-b"].Count()}
	restarted := time.Now()
	domain.Nodes[1].NSMgr.Restart()
	// The heal re-requests through node 1's new NSMgr: each LB serves its
	// connection again after the restart.
	idA, idB := fullmesh.ConnectionID("proxy-a", lbService, "lb-a"), fullmesh.ConnectionID("proxy-a", lbService, "lb-b")
	require.Eventually(t, func() bool {
		return served["lb-a"].Count() > before["lb-a"] && served["lb-b"].Count() > before["lb-b"]
	}, wait, tick,
		"both connections healed through node 1's new NSMgr")
	t.Logf("FIGURE: node 1's NSMgr restarted to both remote LB connections re-requested through it: %v", time.Since(restarted).Round(time.Millisecond))
	require.Zero(t, closes.Of(idA)+closes.Of(idB), "LBs that answer are re-requested as they are, never closed")
	require.Zero(t, withdraws.Load(), "nor withdrawn from the data path")
	require.Len(t, mesh.Connections(), 2)

	stopped := time.Now()
	_, err = entries["lb-a"].Unregister(ctx, nses["lb-a"])
	require.NoError(t, err)
	entries["lb-a"].Cancel()
	require.Eventually(t, func() bool { _, ok := withdrawn.Load(idA); return ok }, wait, tick,
		"the unregistered LB is withdrawn although it answers")
	at, _ := withdrawn.Load(idA)
	t.Logf("FIGURE: remote LB unregistered to its connection withdrawn: %v", at.(time.Time).Sub(stopped).Round(time.Millisecond))
	require.Eventually(t, func() bool { _, ok := mesh.Connections()["lb-a"]; return !ok && closes.Of(idA) > 0 }, wait, tick,
		"and its connection closed")
	require.Equal(t, int32(1), withdraws.Load(), "the other LB stays")
	require.Zero(t, closes.Of(idB))
	require.Equal(t, 1, lbs["lb-b"].Count())
}
