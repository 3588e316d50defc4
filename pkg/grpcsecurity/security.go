// Package grpcsecurity is the transport security of a service's gRPC server
// and of its own clients: SPIFFE mTLS from the workload API, or plain text
// asked for explicitly (and warned), and the authorization of the server's
// callers by SPIFFE ID (pkg/spiffeauthz). The ipam and nsp daemons open it
// and hand its server options to their gRPC servers.
package grpcsecurity

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/insecurewarning"
	"github.com/causeway-net/causeway/internal/svidlog"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// SecurityConfig is a service's choice of transport security.
type SecurityConfig struct {
	// EnvPrefix names the service's settings in messages: EnvPrefix_INSECURE
	// and EnvPrefix_AUTHORIZED_IDS.
	EnvPrefix string
	// Insecure asks for plain gRPC; Plaintext says what then runs in plain
	// text, for the recurring warning.
	Insecure  bool
	Plaintext string
	// AuthorizedIDs are the rules of the callers allowed to call
	// (spiffeauthz.Rule: SPIFFE IDs or path patterns in the server's own
	// trust domain); empty: any caller the trust bundle verifies.
	AuthorizedIDs []string
}

func (c SecurityConfig) insecureEnv() string { return c.EnvPrefix + "_INSECURE" }

func (c SecurityConfig) authorizedIDsEnv() string { return c.EnvPrefix + "_AUTHORIZED_IDS" }

// Validate checks the authorized IDs: rules, and only with mTLS. The error
// names the setting.
func (c SecurityConfig) Validate() error {
	if _, err := spiffeauthz.ParseRules(c.AuthorizedIDs); err != nil {
		return fmt.Errorf("%s: %w", c.authorizedIDsEnv(), err)
	}
	if c.Insecure && len(c.AuthorizedIDs) > 0 {
		return fmt.Errorf("%s: callers cannot be authorized by SPIFFE ID with %s=true", c.authorizedIDsEnv(), c.insecureEnv())
	}
	return nil
}

// Security is the transport security of a service's gRPC server and of its
// own clients.
type Security struct {
	// ServerOptions are the server's credentials and the authorization of
	// its callers.
	ServerOptions []grpc.ServerOption
	// Client are the credentials of the service's clients.
	Client credentials.TransportCredentials
	// ownTrustDomain is that of the service's current SVID (zero in plain
	// text): the trust domain of the rules that leave it out.
	ownTrustDomain spiffeauthz.TrustDomainFunc
	// source is the workload API's X.509 source (nil in plain text).
	source *workloadapi.X509Source
}

// ClientFor are the credentials of a client that holds the server it dials
// to rules (spiffeauthz.ServerAuthorizer; empty: any SVID the bundle
// verifies). In plain text they are Client.
func (s *Security) ClientFor(rules []string) (credentials.TransportCredentials, error) {
	if s.source == nil {
		return s.Client, nil
	}
	authz, err := spiffeauthz.ServerAuthorizer(rules, s.ownTrustDomain)
	if err != nil {
		return nil, err
	}
	return credentials.NewTLS(tlsconfig.MTLSClientConfig(s.source, s.source, authz)), nil
}

// Secure says whether the service runs SPIFFE mTLS (callers have IDs).
func (s *Security) Secure() bool { return s.source != nil }

// TrustDomain is that of the service's current SVID (zero in plain text).
func (s *Security) TrustDomain() spiffeid.TrustDomain {
	if s.ownTrustDomain == nil {
		return spiffeid.TrustDomain{}
	}
	return s.ownTrustDomain()
}

// spiffeWait bounds the wait for the first SVID.
const spiffeWait = time.Minute

// OpenSecurity returns plain text when cfg asks for it (warned now and
// hourly until release), and otherwise SPIFFE mTLS from the workload API at
// SPIFFE_ENDPOINT_SOCKET, which must then be set (any verified SPIFFE ID is
// accepted at the TLS level, as Meridio's services do; cfg.AuthorizedIDs
// narrows the callers). release stops the warning and releases the X.509
// source.
func OpenSecurity(ctx context.Context, cfg SecurityConfig, logger *slog.Logger) (_ *Security, release func(), err error) {
	sec, closeCreds, err := transport(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	release = closeCreds
	if cfg.Insecure {
		stopWarning := insecurewarning.Start(logger, cfg.insecureEnv(), cfg.Plaintext)
		release = func() { stopWarning(); closeCreds() }
	} else {
		logger.Info("using SPIFFE mTLS")
	}
	authz, err := spiffeauthz.Options(cfg.AuthorizedIDs, sec.ownTrustDomain, logger)
	if err != nil {
		release()
		return nil, nil, fmt.Errorf("%s: %w", cfg.authorizedIDsEnv(), err)
	}
	sec.ServerOptions = append(sec.ServerOptions, authz...)
	return sec, release, nil
}

// transport returns the server and client credentials of cfg's mode and the
// function that releases them. Each SVID received is logged.
func transport(ctx context.Context, cfg SecurityConfig, logger *slog.Logger) (*Security, func(), error) {
	if cfg.Insecure {
		return &Security{
			ServerOptions: []grpc.ServerOption{grpc.Creds(insecure.NewCredentials())},
			Client:        insecure.NewCredentials(),
		}, func() {}, nil
	}
	if os.Getenv("SPIFFE_ENDPOINT_SOCKET") == "" {
		msg := fmt.Sprintf("SPIFFE_ENDPOINT_SOCKET is not set: set it to the SPIRE agent's socket for SPIFFE mTLS, or %s=true for plain gRPC", cfg.insecureEnv())
		// A configuration error: exit status 2, as for the service's own
		// variables.
		return nil, nil, &daemon.ExitError{Status: 2, Message: msg, Err: errors.New(msg)}
	}
	sctx, cancel := context.WithTimeout(ctx, spiffeWait)
	defer cancel()
	source, err := workloadapi.NewX509Source(sctx)
	if err != nil {
		return nil, nil, fmt.Errorf("SPIFFE X.509 source: %w", err)
	}
	stopLog := svidlog.Start(source, logger)
	return &Security{
		ServerOptions:  []grpc.ServerOption{grpc.Creds(credentials.NewTLS(tlsconfig.MTLSServerConfig(source, source, tlsconfig.AuthorizeAny())))},
		Client:         credentials.NewTLS(tlsconfig.MTLSClientConfig(source, source, tlsconfig.AuthorizeAny())),
		ownTrustDomain: svidTrustDomain(source),
		source:         source,
	}, func() { stopLog(); _ = source.Close() }, nil
}

// svidTrustDomain returns the trust domain of src's current SVID (zero if
// it has none).
func svidTrustDomain(src x509svid.Source) spiffeauthz.TrustDomainFunc {
	return func() spiffeid.TrustDomain {
		svid, err := src.GetX509SVID()
		if err != nil {
			return spiffeid.TrustDomain{}
		}
		return svid.ID.TrustDomain()
	}
}
