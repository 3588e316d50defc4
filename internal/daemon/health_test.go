package daemon

import (
	"context"
	"log/slog"
	"net"
	"testing"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	grpchealth "google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
)

func TestServeHealthAnswersInPlainText(t *testing.T) {
	hs := grpchealth.NewServer()
	hs.SetServingStatus("svc.v1.Svc", healthpb.HealthCheckResponse_NOT_SERVING)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	stop := ServeHealth(lis, hs, slog.New(slog.DiscardHandler))
	defer stop()

	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)
	ctx := context.Background()
	r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_SERVING, r.GetStatus())
	r, err = hc.Check(ctx, &healthpb.HealthCheckRequest{Service: "svc.v1.Svc"})
	require.NoError(t, err)
	require.Equal(t, healthpb.HealthCheckResponse_NOT_SERVING, r.GetStatus())
}

func TestListenHealthOnlyWithAPort(t *testing.T) {
	logger := slog.New(slog.DiscardHandler)
	stop, err := ListenHealth("127.0.0.1", 0, grpchealth.NewServer(), logger)
	require.NoError(t, err)
	stop()

	busy, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer busy.Close()
	_, err = ListenHealth("127.0.0.1", busy.Addr().(*net.TCPAddr).Port, grpchealth.NewServer(), logger)
	require.ErrorContains(t, err, "health listen")
}
