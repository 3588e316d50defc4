package ipamd

import (
	"context"
	"errors"
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

// transportCredentials returns plain text when asked for (IPAM_INSECURE),
// and otherwise SPIFFE mTLS from the workload API at SPIFFE_ENDPOINT_SOCKET,
// which must then be set (any verified SPIFFE ID is accepted at the TLS
// level, as Meridio; IPAM_AUTHORIZED_IDS narrows it). The returned function
// releases the X.509 source.
func transportCredentials(ctx context.Context, plain bool, logger *slog.Logger) (transport, func(), error) {
	if plain {
		return transport{insecure.NewCredentials(), insecure.NewCredentials()}, func() {}, nil
	}
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		return transport{}, nil, errors.New("SPIFFE_ENDPOINT_SOCKET is not set: set it to the SPIRE agent's socket for SPIFFE mTLS, or IPAM_INSECURE=true for plain gRPC")
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
