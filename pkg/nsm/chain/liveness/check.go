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

// Answering reports whether the connection's far end answers on its data
// path now and, as far as the caller can tell, still serves (the proxy: its
// datapath check of an LB's addresses, and the registry listing the LB);
// false when nothing says so.
type Answering func(conn *networkservice.Connection) bool

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

// Check is dead when the connection's link is lost. Otherwise it is alive
// when the NSMgr does not answer a new request to its MonitorConnection
// service (stopped, restarting, draining its last streams), or is a new
// run that cannot know the connection yet, or reports it up: the control
// plane is away or fine, and heal re-requests as it is.
//
// When the NSMgr reports the connection down, or does not know it although
// it is the run that established it, that report may only say that a hop
// of the control plane went: the NSMgr reports down every connection
// through a forwarder it lost (its forwarder, or another node's NSMgr or
// forwarder, replaced), while the kernel still forwards. So the connection
// is alive while its far end answers on the data path (answering, which
// may be nil: nothing answers), and heal re-requests it as it is; silent,
// the NSMgr is believed and heal reselects. A far end that is really gone
// is dropped by its owner: its link going, its registration going (the
// full mesh), or its silence.
func Check(states networkservice.MonitorConnectionClient, lost LinkLost, known KnownByThisRun, answering Answering) heal.LivenessCheck {
	return func(ctx context.Context, conn *networkservice.Connection) bool {
		if lost != nil && lost(conn) {
			return false
		}
		if notReportedDown(ctx, states, known, conn) {
			return true
		}
		return answering != nil && answering(conn)
	}
}

// notReportedDown is false when the NSMgr reports conn down, or does not
// know it although it is the run that established it.
func notReportedDown(ctx context.Context, states networkservice.MonitorConnectionClient, known KnownByThisRun, conn *networkservice.Connection) bool {
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
