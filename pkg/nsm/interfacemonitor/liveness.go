package interfacemonitor

import (
	"context"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// LivenessCheck is the data-plane check for the SDK's heal client
// (heal.WithLivenessCheck) of connections of type t: a connection is alive
// unless its kernel link was seen and has gone away (Lost). With it, a heal
// that starts because the NSM control plane went away re-requests the
// connection as it is, keeping its interface, port, nexthops and addresses,
// instead of closing it first (the SDK's reselect when it has no check).
func (m *Monitor) LivenessCheck(t proxy.ConnType) heal.LivenessCheck {
	return func(_ context.Context, conn *networkservice.Connection) bool {
		return !m.Lost(t, conn.GetId())
	}
}
