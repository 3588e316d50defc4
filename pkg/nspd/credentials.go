package nspd

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"time"

	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// serverCredentials returns plain text when asked for (NSP_INSECURE), and
// otherwise SPIFFE mTLS from the workload API at SPIFFE_ENDPOINT_SOCKET,
// which must then be set (any verified SPIFFE ID is accepted at the TLS
// level, as the proxy and Meridio's NSP expect; NSP_AUTHORIZED_IDS narrows
// it). The returned function releases the SPIFFE source.
func serverCredentials(ctx context.Context, plain bool, logger *slog.Logger) (grpccreds.TransportCredentials, func(), error) {
	if plain {
		return insecure.NewCredentials(), func() {}, nil
	}
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		return nil, nil, errors.New("SPIFFE_ENDPOINT_SOCKET is not set: set it to the SPIRE agent's socket for SPIFFE mTLS, or NSP_INSECURE=true for plain gRPC")
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	c, err := credentials.FromWorkloadAPI(sctx, 0)
	if err != nil {
		return nil, nil, err
	}
	logger.Info("using SPIFFE mTLS")
	return c.ServerTransportCredentials(), func() { _ = c.Close() }, nil
}
