package proxyd_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/updatepath"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/tools/grpcutils"
	"github.com/networkservicemesh/sdk/pkg/tools/sandbox"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nsm/endpoint"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

// targetBed is a running proxy daemon on a fake dataplane with the real
// IPAM engine, reached by its targets directly on its endpoint's socket, as
// an NSMgr reaches it (one gRPC connection and one MonitorConnections
// stream per target connection). No NSM control plane: the daemon's NSMgr
// does not exist (it registers in the background and has no LB).
type targetBed struct {
	ctx   context.Context
	dp    *fakeDataplane
	d     *proxyd.Daemon
	ports chan []dataplane.Port // the ports of every Apply
	conns []*benchTarget
}

// benchTarget is one target connection as its NSMgr holds it.
type benchTarget struct {
	cc     *grpc.ClientConn
	nsc    networkservice.NetworkServiceClient
	conn   *networkservice.Connection
	stop   context.CancelFunc // ends its monitor stream
	ifName string
}

func newTargetBed(b *testing.B, n int) *targetBed {
	b.Helper()
	// IPv4 node subnets of /20: two addresses a target, n+1 targets.
	e := newServices(b, 20)
	e.connectTo.Scheme, e.connectTo.Path = "unix", e.dir+"/no-nsmgr.sock"
	cfg := e.config(b, time.Millisecond)
	cfg.ListenOn = ""
	// Every target here is one client's (the test's SPIFFE ID), and a
	// closed one counts until its release: the limit per client would
	// refuse the 129th. It is not what is measured.
	cfg.MaxConnectionsPerClient = 1 << 20
	tb := &targetBed{ctx: e.ctx, ports: make(chan []dataplane.Port, 1)}
	tb.d, tb.dp = e.start(b, cfg)
	tb.dp.OnApply(func(s dataplane.State) {
		// The latest state replaces one nobody read yet (Applies are
		// serial): a waiter never misses the Apply it waits for.
		select {
		case <-tb.ports:
		default:
		}
		tb.ports <- s.Ports
	})
	for i := range n {
		tb.conns = append(tb.conns, tb.connect(b, i))
	}
	b.Cleanup(func() {
		for _, t := range tb.conns {
			tb.disconnect(b, t)
		}
	})
	return tb
}

// connect requests target i's connection, lets its link appear and waits
// until the link is a port of an applied state.
func (tb *targetBed) connect(b *testing.B, i int) *benchTarget {
	// As the NSMgr dials: plaintext, a token in every call.
	cc, err := grpc.NewClient(grpcutils.URLToTarget(tb.d.EndpointURL()), sandbox.DialOptions()...)
	require.NoError(b, err)
	t := &benchTarget{cc: cc, nsc: chain.NewNetworkServiceClient(
		updatepath.NewClient(fmt.Sprintf("target-%d", i)),
		kernel.NewClient(),
		networkservice.NewNetworkServiceClient(cc))}
	ctx, cancel := context.WithTimeout(tb.ctx, wait)
	defer cancel()
	t.conn, err = t.nsc.Request(ctx, &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{
		Id: fmt.Sprintf("target-%d-conn", i), NetworkService: service, Labels: map[string]string{endpoint.NodeNameLabel: node},
	}})
	require.NoError(b, err, "target %d", i)
	t.ifName = kernelmech.ToMechanism(t.conn.GetMechanism()).GetInterfaceName()
	require.NotEmpty(b, t.ifName)
	segs := t.conn.GetPath().GetPathSegments()
	mctx, stop := context.WithCancel(tb.ctx)
	t.stop = stop
	_, err = networkservice.NewMonitorConnectionClient(cc).MonitorConnections(mctx, &networkservice.MonitorScopeSelector{
		PathSegments: []*networkservice.PathSegment{{Id: segs[len(segs)-1].GetId()}},
	})
	require.NoError(b, err)
	idx := tb.dp.AddLink(t.ifName)
	tb.waitPort(b, idx)
	return t
}

// waitPort waits for an Apply whose ports hold idx.
func (tb *targetBed) waitPort(b *testing.B, idx int) {
	deadline := time.After(wait)
	for {
		select {
		case ports := <-tb.ports:
			if _, found := slices.BinarySearchFunc(ports, idx, func(p dataplane.Port, idx int) int { return cmp.Compare(p.Index, idx) }); found {
				return
			}
		case <-deadline:
			b.Fatalf("link %d never became a port", idx)
		}
	}
}

// disconnect closes t's connection as its NSMgr would and removes its link.
func (tb *targetBed) disconnect(b *testing.B, t *benchTarget) {
	ctx, cancel := context.WithTimeout(tb.ctx, wait)
	defer cancel()
	_, err := t.nsc.Close(ctx, t.conn)
	require.NoError(b, err)
	tb.dp.DelLink(t.ifName)
	t.stop()
	require.NoError(b, t.cc.Close())
}

// targetRequestTime is the median, over trials, of the time a proxy serving
// n targets takes to add one more: its Request through the endpoint chain
// (the SDK's endpoint elements, authorization, the link matcher, the
// IP context with the real IPAM engine over gRPC), then its link's event
// until the Apply that makes it a port. The target is closed again between
// trials, untimed.
func targetRequestTime(b *testing.B, n, trials int) time.Duration {
	tb := newTargetBed(b, n)
	times := make([]time.Duration, 0, trials)
	for i := range trials {
		start := time.Now()
		t := tb.connect(b, n+i)
		times = append(times, time.Since(start))
		tb.disconnect(b, t)
	}
	sort.Slice(times, func(i, j int) bool { return times[i] < times[j] })
	return times[len(times)/2]
}

// BenchmarkTargetRequest is the proxy's own cost of adding a target at 100
// and at 1,000 targets, all of it in this process (no kernel, no NSM control
// plane: BenchmarkAddPort in pkg/dataplane has the kernel's part beside the
// kernel's own enslave). The aim: the same within 1.5×.
func BenchmarkTargetRequest(b *testing.B) {
	const trials = 200
	var small, large time.Duration
	for b.Loop() {
		small = targetRequestTime(b, 100, trials)
		large = targetRequestTime(b, 1000, trials)
	}
	b.ReportMetric(float64(small.Microseconds()), "µs/target@100")
	b.ReportMetric(float64(large.Microseconds()), "µs/target@1000")
	b.Logf("FIGURE: the proxy adds a target (median of %d, dual-stack, real IPAM engine, fake dataplane) in %v at 100 targets, %v at 1000 (ratio %.2f)",
		trials, small, large, float64(large)/float64(small))
}
