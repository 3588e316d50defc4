package testutil

import (
	"context"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestServeGRPCServesUntilStop(t *testing.T) {
	s := ServeGRPC(t, "", func(gs *grpc.Server) { healthpb.RegisterHealthServer(gs, health.NewServer()) })
	hc := healthpb.NewHealthClient(s.Dial(t))
	ctx := t.Context()
	resp, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	if err != nil || resp.GetStatus() != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("Check = %v, %v", resp, err)
	}
	s.Stop()
	s.Stop() // idempotent, and again at cleanup
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := hc.Check(cctx, &healthpb.HealthCheckRequest{}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Check after Stop: %v, want Unavailable", err)
	}
}
