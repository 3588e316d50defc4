package liveness

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"google.golang.org/grpc"
	grpcbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/stats"

	"github.com/causeway-net/causeway/internal/backoff"
)

// NSMgr is the heal check's line to the NSMgr: a client of its
// MonitorConnection service (states) on a gRPC connection of its own, the
// count of that connection's transports (the NSMgr's runs, as seen from
// here), and the run each connection was last established through. Safe
// for concurrent use.
type NSMgr struct {
	cc     *grpc.ClientConn
	states networkservice.MonitorConnectionClient
	runs   runCounter

	mu    sync.Mutex
	acked map[string]uint64 // connection id → run of its last successful Request
}

// confirmRetry spaces out ack's questions to an NSMgr that did not answer.
const confirmRetry = 20 * time.Millisecond

// reconnect is the backoff of the gRPC connection to the NSMgr: the NSMgr is local, and a
// new run should be asked (and counted) soon after it is up.
var reconnect = grpc.ConnectParams{
	Backoff:           grpcbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
	MinConnectTimeout: 5 * time.Second,
}

// Dial returns an NSMgr whose gRPC connection goes to target with opts.
// The connection never idles (an idle connection would start a new
// transport, and so a new run, without the NSMgr having gone away),
// connects at once and retries at least every second. Close closes it.
func Dial(target string, opts ...grpc.DialOption) (*NSMgr, error) {
	n := &NSMgr{acked: make(map[string]uint64)}
	opts = append(slices.Clip(opts), grpc.WithStatsHandler(&n.runs), grpc.WithIdleTimeout(0), grpc.WithConnectParams(reconnect))
	cc, err := grpc.NewClient(target, opts...)
	if err != nil {
		return nil, fmt.Errorf("nsmgr connection to %s: %w", target, err)
	}
	cc.Connect()
	n.cc, n.states = cc, networkservice.NewMonitorConnectionClient(cc)
	return n, nil
}

// ConnStates is the client of the NSMgr's MonitorConnection service, which
// answers the state of a connection.
func (n *NSMgr) ConnStates() networkservice.MonitorConnectionClient { return n.states }

// Close closes the gRPC connection to the NSMgr.
func (n *NSMgr) Close() error { return n.cc.Close() }

// HealOptions are the heal client's options (see HealOptions) with this
// NSMgr's check, for connections through it.
func (n *NSMgr) HealOptions(lost LinkLost, answering Answering) []heal.Option {
	return HealOptions(n.Check(lost, answering))
}

// Check is the heal check (see Check) on this NSMgr's connection states
// and runs.
func (n *NSMgr) Check(lost LinkLost, answering Answering) heal.LivenessCheck {
	return Check(n.states, lost, n.knownByThisRun, answering)
}

// ack records that conn was established through the current run. The
// NSMgr has just served its Request, but our gRPC connection may not
// have seen that NSMgr yet (it restarted, and the connection's old transport
// is not known to be broken yet): ack asks the NSMgr about conn once,
// reconnecting as needed, for at most askTimeout, so that the run recorded
// is the one that answers.
func (n *NSMgr) ack(ctx context.Context, conn *networkservice.Connection) {
	n.confirm(ctx, conn)
	run := n.runs.current()
	n.mu.Lock()
	n.acked[conn.GetId()] = run
	n.mu.Unlock()
}

// confirm returns once the NSMgr has answered a question about conn, or
// after askTimeout.
func (n *NSMgr) confirm(ctx context.Context, conn *networkservice.Connection) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	for {
		n.settle(ctx)
		if _, _, answered := ask(ctx, n.states, conn); answered {
			return
		}
		if !backoff.Sleep(ctx, confirmRetry) {
			return
		}
	}
}

// settle waits until the gRPC connection is up or ctx ends,
// reconnecting at once if it is idle or backing off.
func (n *NSMgr) settle(ctx context.Context) {
	for s := n.cc.GetState(); s != connectivity.Ready; s = n.cc.GetState() {
		switch s {
		case connectivity.Idle:
			n.cc.Connect()
		case connectivity.TransientFailure:
			n.cc.ResetConnectBackoff()
		case connectivity.Shutdown:
			return
		}
		if !n.cc.WaitForStateChange(ctx, s) {
			return
		}
	}
}

func (n *NSMgr) forget(id string) {
	n.mu.Lock()
	delete(n.acked, id)
	n.mu.Unlock()
}

// knownByThisRun reports whether the NSMgr that answers now is the run the
// connection was last established through. A connection never recorded is
// taken as known (its "unknown" is believed, as without this record).
func (n *NSMgr) knownByThisRun(conn *networkservice.Connection) bool {
	n.mu.Lock()
	run, ok := n.acked[conn.GetId()]
	n.mu.Unlock()
	return !ok || run == n.runs.current()
}

// runCounter counts the transports of the gRPC connection to the NSMgr. The first is
// run 0; each later one means the previous transport broke, which is what
// an NSMgr restart does. A transport's ConnBegin comes before any RPC on
// it, so an answer is never read on a run not yet counted.
type runCounter struct{ begun atomic.Uint64 }

func (r *runCounter) current() uint64 {
	if b := r.begun.Load(); b > 0 {
		return b - 1
	}
	return 0
}

func (r *runCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (r *runCounter) HandleRPC(context.Context, stats.RPCStats)                       {}
func (r *runCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}

func (r *runCounter) HandleConn(_ context.Context, s stats.ConnStats) {
	if _, ok := s.(*stats.ConnBegin); ok {
		r.begun.Add(1)
	}
}
