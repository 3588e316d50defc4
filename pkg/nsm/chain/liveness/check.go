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

// KnownByThisRun reports whether the NSMgr that answers now is the run the
// connection was last established through (see NSMgr).
type KnownByThisRun func(conn *networkservice.Connection) bool

const (
	// askTimeout bounds the question to the NSMgr.
	askTimeout = time.Second
	// healPollInterval turns the SDK's periodic check off in practice.
	healPollInterval = 24 * time.Hour
)

// HealOptions are the heal client's options for a check: it is consulted
// only when the control plane reported the connection down (the SDK's
// periodic data-plane poll is left off: kernel link events already reach
// the proxy), each time within askTimeout.
func HealOptions(check heal.LivenessCheck) []heal.Option {
	return []heal.Option{
		heal.WithLivenessCheck(check),
		heal.WithLivenessCheckTimeout(askTimeout),
		heal.WithLivenessCheckInterval(healPollInterval),
	}
}

// Check is dead when the connection's link is lost, or when the NSMgr
// answers a new request to its MonitorConnection service and reports the
// connection down, or does not know it although it is the run that
// established it: the far end died, and heal reselects. When the NSMgr
// does not answer (stopped, restarting, draining its last streams), or is
// a new run that cannot know the connection yet, the control plane is away
// and the data path is alive: heal re-requests as it is.
func Check(states networkservice.MonitorConnectionClient, lost LinkLost, known KnownByThisRun) heal.LivenessCheck {
	return func(ctx context.Context, conn *networkservice.Connection) bool {
		if lost != nil && lost(conn) {
			return false
		}
		state, found, answered := ask(ctx, states, conn)
		switch {
		case !answered:
			return true
		case found:
			return state != networkservice.State_DOWN
		default:
			return known != nil && !known(conn)
		}
	}
}

// ask asks the NSMgr for the connection's state.
func ask(ctx context.Context, states networkservice.MonitorConnectionClient, conn *networkservice.Connection) (state networkservice.State, known, answered bool) {
	ctx, cancel := context.WithTimeout(ctx, askTimeout)
	defer cancel()
	seg := conn.GetCurrentPathSegment()
	stream, err := states.MonitorConnections(ctx, &networkservice.MonitorScopeSelector{
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
