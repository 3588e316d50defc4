package daemon

import (
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/keepalive"
)

// ProxyPings is the keepalive enforcement of a server that proxies call:
// they ping every NSM_GRPC_KEEPALIVE_TIME (30 s by default, Meridio's and
// Causeway's alike), and gRPC's default policy (5 min) would drop them for
// "too many pings".
func ProxyPings() grpc.ServerOption {
	return grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true})
}
