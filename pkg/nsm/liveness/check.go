package liveness

import (
	"context"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
)

// LinkLost reports whether the connection's kernel link is known to be
// gone (a connection whose link was never seen is not lost).
type LinkLost func(conn *networkservice.Connection) bool

// askTimeout bounds the question to the NSMgr.
const askTimeout = time.Second

// HealOptions are the heal client's options for connections whose NSMgr
// answers on monitor: the check below, consulted only when the control
// plane reported the connection down (the SDK's periodic data-plane poll is
// left off: kernel link events already reach the proxy).
func HealOptions(monitor networkservice.MonitorConnectionClient, lost LinkLost) []heal.Option {
	return []heal.Option{
		heal.WithLivenessCheck(Check(monitor, lost)),
		heal.WithLivenessCheckTimeout(askTimeout),
		heal.WithLivenessCheckInterval(24 * time.Hour),
	}
}

// Check is dead when the connection's link is lost, or when the NSMgr
// answers a new request on its connection monitor and reports the
// connection down or does not know it: the far end died, and heal
// reselects. When the NSMgr does not answer (stopped, restarting, draining
// its last streams) the control plane is away and the data path is alive.
func Check(monitor networkservice.MonitorConnectionClient, lost LinkLost) heal.LivenessCheck {
	return func(ctx context.Context, conn *networkservice.Connection) bool {
		if lost != nil && lost(conn) {
			return false
		}
		state, known, answered := ask(ctx, monitor, conn)
		if !answered {
			return true
		}
		return known && state != networkservice.State_DOWN
	}
}

// ask asks the NSMgr for the connection's state.
func ask(ctx context.Context, monitor networkservice.MonitorConnectionClient, conn *networkservice.Connection) (state networkservice.State, known, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	seg := conn.GetCurrentPathSegment()
	stream, err := monitor.MonitorConnections(ctx, &networkservice.MonitorScopeSelector{
		PathSegments: []*networkservice.PathSegment{{Id: seg.GetId(), Name: seg.GetName()}},
	})
	if err != nil {
		return 0, false, false
	}
	ev, err := stream.Recv()
	if err != nil {
		return 0, false, false
	}
	// The NSMgr keys its connections by its own ids: ours is the one whose
	// path has our segment at our index.
	idx := int(conn.GetPath().GetIndex())
	for _, c := range ev.GetConnections() {
		if segs := c.GetPath().GetPathSegments(); len(segs) > idx && segs[idx].GetId() == conn.GetId() {
			return c.GetState(), true, true
		}
	}
	return 0, false, true
}
