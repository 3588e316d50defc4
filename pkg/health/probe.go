package health

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

// ProbeService returns the probe service that a Kubernetes probe kind
// ("startup", "readiness" or "liveness", any case) queries.
func ProbeService(kind string) (string, error) {
	for _, p := range []string{Startup, Readiness, Liveness} {
		if strings.EqualFold(kind, p) {
			return p, nil
		}
	}
	return "", fmt.Errorf("probe %q: want startup, readiness or liveness", kind)
}

// Probe is the client side of an exec probe: it asks the health service on
// the unix socket at path (a "unix://" prefix is accepted) for the state of
// the probe service of kind and returns nil only if it is SERVING. It does
// not wait for a socket that nobody serves; ctx bounds the whole exchange.
func Probe(ctx context.Context, path, kind string) error {
	service, err := ProbeService(kind)
	if err != nil {
		return err
	}
	conn, err := grpc.NewClient("unix://"+strings.TrimPrefix(path, "unix://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return fmt.Errorf("health socket %s: %w", path, err)
	}
	defer conn.Close()
	resp, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return fmt.Errorf("%s probe on %s: %w", service, path, err)
	}
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return fmt.Errorf("%s probe on %s: %s", service, path, st)
	}
	return nil
}
