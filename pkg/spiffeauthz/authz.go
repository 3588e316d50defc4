// Package spiffeauthz authorizes the callers of a gRPC server by the SPIFFE
// ID of the X.509-SVID that mutual TLS verified: a caller whose ID is not in
// the list is refused with PermissionDenied and logged. Mutual TLS itself
// (tlsconfig.MTLSServerConfig) already refuses a caller without an SVID or
// with one from a trust domain whose bundle the server lacks; this package
// is the per-identity layer above it. The gRPC health service stays open to
// every verified caller.
package spiffeauthz

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/spiffe/go-spiffe/v2/spiffeid"
	"github.com/spiffe/go-spiffe/v2/svid/x509svid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// healthPrefix is the method prefix of grpc.health.v1, never refused.
const healthPrefix = "/grpc.health.v1.Health/"

// ParseIDs parses SPIFFE IDs (spiffe://trust-domain/path), naming the first
// bad one.
func ParseIDs(list []string) ([]spiffeid.ID, error) {
	ids := make([]spiffeid.ID, 0, len(list))
	for _, s := range list {
		id, err := spiffeid.FromString(strings.TrimSpace(s))
		if err != nil {
			return nil, fmt.Errorf("%q is not a SPIFFE ID: %w", s, err)
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// Authorizer holds the SPIFFE IDs allowed to call a server.
type Authorizer struct {
	allowed map[spiffeid.ID]bool
	log     *slog.Logger
}

// New returns an authorizer of ids that logs refusals to logger.
func New(ids []spiffeid.ID, logger *slog.Logger) *Authorizer {
	a := &Authorizer{allowed: make(map[spiffeid.ID]bool, len(ids)), log: logger}
	for _, id := range ids {
		a.allowed[id] = true
	}
	return a
}

// ServerOptions are the interceptors to give grpc.NewServer, chained after
// any others.
func (a *Authorizer) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := a.authorize(ctx, info.FullMethod); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			if err := a.authorize(ss.Context(), info.FullMethod); err != nil {
				return err
			}
			return h(srv, ss)
		}),
	}
}

// authorize returns nil for an allowed caller of method, PermissionDenied
// otherwise.
func (a *Authorizer) authorize(ctx context.Context, method string) error {
	if strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	id, err := callerID(ctx)
	if err == nil && a.allowed[id] {
		return nil
	}
	caller := id.String()
	if err != nil {
		caller = err.Error()
	}
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	a.log.Warn("refused an unauthorized caller", "method", method, "caller", caller, "peer", addr)
	return status.Errorf(codes.PermissionDenied, "caller %s is not authorized for %s", caller, method)
}

// callerID is the SPIFFE ID of the client certificate of ctx. go-spiffe's
// server configuration verifies that certificate against the bundles in its
// own callback, so the handshake succeeded only if it is a valid SVID (the
// standard VerifiedChains stay empty with it).
func callerID(ctx context.Context) (spiffeid.ID, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return spiffeid.ID{}, errors.New("no peer")
	}
	info, ok := p.AuthInfo.(credentials.TLSInfo)
	if !ok || len(info.State.PeerCertificates) == 0 {
		return spiffeid.ID{}, errors.New("no client certificate (not mTLS)")
	}
	id, err := x509svid.IDFromCert(info.State.PeerCertificates[0])
	if err != nil {
		return spiffeid.ID{}, fmt.Errorf("client certificate: %w", err)
	}
	return id, nil
}

// Options parses ids and returns the server options that authorize them,
// or none for an empty list (any verified caller is served).
func Options(ids []string, logger *slog.Logger) ([]grpc.ServerOption, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	parsed, err := ParseIDs(ids)
	if err != nil {
		return nil, err
	}
	logger.Info("authorizing callers by SPIFFE ID", "ids", ids)
	return New(parsed, logger).ServerOptions(), nil
}
