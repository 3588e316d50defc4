package ipamd

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// transport holds the credentials of the IPAM's gRPC server and of its
// client towards the configuration server.
type transport struct {
	server, client credentials.TransportCredentials
}

// transportCredentials returns SPIFFE mTLS (any SPIFFE ID authorized, as
// Meridio) when SPIFFE_ENDPOINT_SOCKET is set, plain text otherwise. The
// returned function releases the X.509 source.
func transportCredentials(ctx context.Context, logger *slog.Logger) (transport, func(), error) {
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		logger.Warn("SPIFFE_ENDPOINT_SOCKET is not set: serving and dialing without TLS")
		return transport{insecure.NewCredentials(), insecure.NewCredentials()}, func() {}, nil
	}
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	source, err := workloadapi.NewX509Source(sctx)
	if err != nil {
		return transport{}, nil, fmt.Errorf("SPIFFE X.509 source: %w", err)
	}
	logger.Info("using SPIFFE mTLS")
	return transport{
		server: credentials.NewTLS(tlsconfig.MTLSServerConfig(source, source, tlsconfig.AuthorizeAny())),
		client: credentials.NewTLS(tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeAny())),
	}, func() { _ = source.Close() }, nil
}
