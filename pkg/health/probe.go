package health

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
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
// the probe service of kind and returns a nil error only if it is SERVING,
// with the probe's warnings (see RegisterWarning). It does not wait for a
// socket that nobody serves; ctx bounds the whole exchange. When the probe
// is not serving, the error names those of explain (the probe's
// subservices) that are not serving either, and the warnings.
func Probe(ctx context.Context, path, kind string, explain ...string) (warnings []string, err error) {
	service, err := ProbeService(kind)
	if err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+strings.TrimPrefix(path, "unix://"),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, fmt.Errorf("health socket %s: %w", path, err)
	}
	defer conn.Close()
	client := healthpb.NewHealthClient(conn)
	var md metadata.MD
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&md))
	if err != nil {
		return nil, fmt.Errorf("%s probe on %s: %w", service, path, err)
	}
	warnings = md.Get(WarningHeader)
	if st := resp.GetStatus(); st != healthpb.HealthCheckResponse_SERVING {
		return warnings, fmt.Errorf("%s probe on %s: %s%s%s", service, path, st, failing(ctx, client, explain), WarningText(warnings))
	}
	return warnings, nil
}

// WarningText is warnings as a probe's output adds them: "; warning: A; B",
// or "" when there is none.
func WarningText(warnings []string) string {
	if len(warnings) == 0 {
		return ""
	}
	return "; warning: " + strings.Join(warnings, "; ")
}

func checkOne(ctx context.Context, client healthpb.HealthClient, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	resp, err := client.Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return resp.GetStatus(), err
}

// failing lists the subservices that are not serving, as " (not serving:
// A, B)", or "" when none is known to fail.
func failing(ctx context.Context, client healthpb.HealthClient, subservices []string) string {
	var bad []string
	for _, s := range subservices {
		if st, err := checkOne(ctx, client, s); err != nil || st != healthpb.HealthCheckResponse_SERVING {
			bad = append(bad, s)
		}
	}
	if len(bad) == 0 {
		return ""
	}
	return " (not serving: " + strings.Join(bad, ", ") + ")"
}
