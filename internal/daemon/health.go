package daemon

import (
	"fmt"
	"log/slog"
	"net"
	"strconv"

	"google.golang.org/grpc"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ServeHealth serves hs, and nothing else, in plain text on lis: the port of
// the kubelet's gRPC probes, which speak no TLS, while the service's own port
// asks for SPIFFE mTLS. Only serving states can be read there. The returned
// stop ends the server (closing lis) and waits for it.
func ServeHealth(lis net.Listener, hs healthpb.HealthServer, logger *slog.Logger) (stop func()) {
	gs := grpc.NewServer()
	healthpb.RegisterHealthServer(gs, hs)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := gs.Serve(lis); err != nil {
			logger.Error("health server stopped", "error", err)
		}
	}()
	logger.Info("serving plain-text health for probes", "address", lis.Addr().String())
	return func() { gs.Stop(); <-done }
}

// ListenHealth is ServeHealth on a listener of host:port, and nothing for
// port 0 (stop is then a no-op).
func ListenHealth(host string, port int, hs healthpb.HealthServer, logger *slog.Logger) (stop func(), err error) {
	if port <= 0 {
		return func() {}, nil
	}
	lis, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return nil, fmt.Errorf("health listen: %w", err)
	}
	return ServeHealth(lis, hs, logger), nil
}
