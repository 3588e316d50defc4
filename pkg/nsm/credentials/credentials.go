package credentials

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/tools/token"
	"github.com/spiffe/go-spiffe/v2/bundle/x509bundle"
	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/spiffetls/tlsconfig"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"github.com/spiffe/go-spiffe/v2/workloadapi"
	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/causeway-net/causeway/internal/svidlog"
	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// Source provides the workload's SVID and the trust bundles
// (*workloadapi.X509Source is one).
type Source interface {
	x509svid.Source
	x509bundle.Source
}

// Credentials hands out the gRPC options of one security mode.
type Credentials struct {
	source   Source // nil in insecure mode
	closer   func() error
	lifetime time.Duration
}

// Config selects the security mode.
type Config struct {
	// Insecure selects plaintext and unsigned tokens (local use only).
	Insecure bool
	// MaxTokenLifetime bounds the NSM tokens.
	MaxTokenLifetime time.Duration
	// Logger receives the insecure-mode warning.
	Logger *slog.Logger
	// Node, when set, picks among several SVIDs of the workload API the one
	// whose ID names this node (see PickNode); otherwise the first is used.
	Node string
}

// New returns insecure credentials when cfg.Insecure is set, and otherwise
// SPIFFE credentials from the workload API (FromWorkloadAPI).
func New(ctx context.Context, cfg Config) (*Credentials, error) {
	if cfg.Insecure {
		return Insecure(cfg.Logger, cfg.MaxTokenLifetime), nil
	}
	var opts []workloadapi.X509SourceOption
	if cfg.Node != "" {
		opts = append(opts, workloadapi.WithDefaultX509SVIDPicker(PickNode(cfg.Node)))
	}
	return FromWorkloadAPI(ctx, cfg.MaxTokenLifetime, cfg.Logger, opts...)
}

// PickNode returns a picker of the SVID whose ID's path ends in
// "/node/<node>" (the per-node IDs of the chart's spire.nodeIDs), else of
// the first one. A pod selected by several ClusterSPIFFEIDs gets an SVID
// of each (SPIRE's own chart names every pod by its service account), and
// the workload API's order says nothing of which one is meant.
func PickNode(node string) func([]*x509svid.SVID) *x509svid.SVID {
	suffix := "/node/" + node
	return func(svids []*x509svid.SVID) *x509svid.SVID {
		for _, s := range svids {
			if strings.HasSuffix(s.ID.Path(), suffix) {
				return s
			}
		}
		if len(svids) == 0 {
			return nil
		}
		return svids[0]
	}
}

// FromWorkloadAPI connects to the SPIFFE workload API (the socket named by
// SPIFFE_ENDPOINT_SOCKET) and waits, bounded by ctx, for the first SVID.
// maxTokenLifetime bounds the NSM tokens. Each SVID it receives is logged
// to logger (nil: slog.Default()). Close releases the source.
func FromWorkloadAPI(ctx context.Context, maxTokenLifetime time.Duration, logger *slog.Logger, opts ...workloadapi.X509SourceOption) (*Credentials, error) {
	src, err := workloadapi.NewX509Source(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("spiffe workload api x509 source: %w", err)
	}
	if logger == nil {
		logger = slog.Default()
	}
	stopLog := svidlog.Start(src, logger)
	c := FromSource(src, maxTokenLifetime)
	c.closer = func() error { stopLog(); return src.Close() }
	return c, nil
}

// FromSource uses an existing SVID and bundle source (not closed by Close).
func FromSource(src Source, maxTokenLifetime time.Duration) *Credentials {
	return &Credentials{source: src, lifetime: maxTokenLifetime}
}

// Insecure returns plaintext credentials with unsigned tokens, accepted only
// by peers that authorize anything (authorize.Any()). It logs a warning: this
// mode is for local labs and tests.
func Insecure(logger *slog.Logger, maxTokenLifetime time.Duration) *Credentials {
	if logger == nil {
		logger = slog.Default()
	}
	logger.Warn("gRPC security is OFF: plaintext transport and unsigned NSM tokens; use only for local testing")
	return &Credentials{lifetime: maxTokenLifetime}
}

// Secure says whether SPIFFE mTLS is in use.
func (c *Credentials) Secure() bool { return c.source != nil }

// Close releases the workload API source, if this package opened it.
func (c *Credentials) Close() error {
	if c.closer == nil {
		return nil
	}
	return c.closer()
}

// TokenGenerator signs NSM tokens: ES256 JWTs with the SVID key that carry
// the SVID's chain (pkg/nsm/clientproof: a server after the NSMgr can
// prove their subject), or unsigned JWTs (alg "none", subject
// spiffe://causeway.local/insecure) in insecure mode, which the SDK can
// still read its path ids from.
func (c *Credentials) TokenGenerator() token.GeneratorFunc {
	if c.source != nil {
		return clientproof.Generator(c.source, c.lifetime)
	}
	return unsignedTokens(insecureSubject, c.lifetime)
}

// ClientProver proves the SPIFFE IDs of the clients of NSM connections
// against the trust bundles (opts: clientproof's); nil in insecure mode
// (nothing to prove with).
func (c *Credentials) ClientProver(opts ...clientproof.Option) *clientproof.Prover {
	if c.source == nil {
		return nil
	}
	return clientproof.NewProver(c.source, opts...)
}

// ClientTLSConfig is the mTLS client configuration (nil in insecure mode).
func (c *Credentials) ClientTLSConfig() *tls.Config {
	if c.source == nil {
		return nil
	}
	return tlsconfig.MTLSClientConfig(c.source, c.source, tlsconfig.AuthorizeAny())
}

// ServerTLSConfig is the mTLS server configuration (nil in insecure mode).
func (c *Credentials) ServerTLSConfig() *tls.Config {
	if c.source == nil {
		return nil
	}
	return tlsconfig.MTLSServerConfig(c.source, c.source, tlsconfig.AuthorizeAny())
}

// ClientTransportCredentials are for plain gRPC clients (IPAM, configuration
// server).
func (c *Credentials) ClientTransportCredentials() grpccreds.TransportCredentials {
	if c.source == nil {
		return insecure.NewCredentials()
	}
	return grpccreds.NewTLS(c.ClientTLSConfig())
}

// ClientTransportCredentialsFor are ClientTransportCredentials that hold
// the server to rules (spiffeauthz.ServerAuthorizer, in the trust domain
// of the current SVID for the rules that leave it out; empty: any SVID the
// bundle verifies).
func (c *Credentials) ClientTransportCredentialsFor(rules []string) (grpccreds.TransportCredentials, error) {
	if c.source == nil {
		return insecure.NewCredentials(), nil
	}
	authz, err := spiffeauthz.ServerAuthorizer(rules, c.TrustDomain)
	if err != nil {
		return nil, err
	}
	return grpccreds.NewTLS(tlsconfig.MTLSClientConfig(c.source, c.source, authz)), nil
}

// TrustDomain is the trust domain of the current SVID; zero in insecure
// mode (or for nil credentials) or while there is none.
func (c *Credentials) TrustDomain() spiffeid.TrustDomain {
	if c == nil || c.source == nil {
		return spiffeid.TrustDomain{}
	}
	svid, err := c.source.GetX509SVID()
	if err != nil {
		return spiffeid.TrustDomain{}
	}
	return svid.ID.TrustDomain()
}

// ServerTransportCredentials are for plain gRPC servers.
func (c *Credentials) ServerTransportCredentials() grpccreds.TransportCredentials {
	if c.source == nil {
		return insecure.NewCredentials()
	}
	return grpccreds.NewTLS(c.ServerTLSConfig())
}

// NSMDialOptions are the dial options toward NSM (NSMgr, registry): the
// transport credentials wrapped for file-descriptor passing, the per-RPC
// token, and the interceptors sendfd needs.
func (c *Credentials) NSMDialOptions() []grpc.DialOption {
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(grpcfd.TransportCredentials(c.ClientTransportCredentials())),
		grpc.WithDefaultCallOptions(grpc.PerRPCCredentials(token.NewPerRPCCredentials(c.TokenGenerator()))),
		grpcfd.WithChainStreamInterceptor(),
		grpcfd.WithChainUnaryInterceptor(),
	}
	if c.source == nil {
		opts = append(opts, plaintextTokens()...)
	}
	return opts
}

// NSMServerOptions are the server options of an NSM endpoint.
func (c *Credentials) NSMServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.Creds(grpcfd.TransportCredentials(c.ServerTransportCredentials()))}
}

// AuthorizeServer is the NSE authorization element: the SDK's default
// policies (pkg/nsm/sdkreplacement/authorize) with SPIFFE, anything in insecure mode.
func (c *Credentials) AuthorizeServer() networkservice.NetworkServiceServer {
	if c.source == nil {
		return authorize.NewServer(authorize.Any())
	}
	return authorize.NewServer()
}

// AuthorizeClient is the NSC authorization element.
func (c *Credentials) AuthorizeClient() networkservice.NetworkServiceClient {
	if c.source == nil {
		return authorize.NewClient(authorize.Any())
	}
	return authorize.NewClient()
}

// ErrNoSource is returned by Validate in insecure mode.
var ErrNoSource = errors.New("no SPIFFE source (insecure mode)")

// Validate fetches the current SVID, to check that the source works.
func (c *Credentials) Validate() error {
	if c.source == nil {
		return ErrNoSource
	}
	if _, err := c.source.GetX509SVID(); err != nil {
		return fmt.Errorf("get x509 svid: %w", err)
	}
	return nil
}
