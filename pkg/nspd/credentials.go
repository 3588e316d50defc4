package nspd

import (
	"context"
	"log/slog"
	"os"
	"time"

	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// serverCredentials returns SPIFFE mTLS (any SPIFFE ID authorized, as the
// proxy and Meridio's NSP expect) when SPIFFE_ENDPOINT_SOCKET is set, and
// plain text otherwise. The returned function releases the SPIFFE source.
func serverCredentials(ctx context.Context, logger *slog.Logger) (grpccreds.TransportCredentials, func(), error) {
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		logger.Warn("SPIFFE_ENDPOINT_SOCKET is not set: serving without TLS")
		return insecure.NewCredentials(), func() {}, nil
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
