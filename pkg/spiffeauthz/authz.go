// Package spiffeauthz authorizes the callers of a gRPC server by the SPIFFE
// ID of the X.509-SVID that mutual TLS verified: a caller whose ID matches
// none of the server's rules (Rule: exact IDs, or path patterns in the
// server's own trust domain, for the two ways SPIRE installations name
// pods) is refused with PermissionDenied and logged with why each rule
// missed it. Mutual TLS itself
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

// TrustDomainFunc returns the server's own trust domain (that of its
// current SVID), for the rules that leave it out; zero when not known.
type TrustDomainFunc func() spiffeid.TrustDomain

// Authorizer holds the rules of the callers allowed to call a server.
type Authorizer struct {
	rules []Rule
	own   TrustDomainFunc
	log   *slog.Logger
}

// New returns an authorizer of rules that logs refusals to logger; own
// gives the trust domain of the rules that leave it out.
func New(rules []Rule, own TrustDomainFunc, logger *slog.Logger) *Authorizer {
	if own == nil {
		own = func() spiffeid.TrustDomain { return spiffeid.TrustDomain{} }
	}
	return &Authorizer{rules: rules, own: own, log: logger}
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
// otherwise; a refusal is logged with the caller's ID and why each rule
// missed it.
func (a *Authorizer) authorize(ctx context.Context, method string) error {
	if strings.HasPrefix(method, healthPrefix) {
		return nil
	}
	id, err := callerID(ctx)
	if err != nil {
		a.refuse(ctx, method, err.Error(), nil)
		return status.Errorf(codes.PermissionDenied, "caller without a SPIFFE ID is not authorized for %s: %v", method, err)
	}
	misses, ok := a.check(id)
	if ok {
		return nil
	}
	a.refuse(ctx, method, id.String(), misses)
	return status.Errorf(codes.PermissionDenied, "caller %s is not authorized for %s: it matches none of the server's rules (%s)", id, method, strings.Join(misses, "; "))
}

// check returns whether id matches a rule and, when it does not, why each
// rule missed it ("<rule>: <reason>").
func (a *Authorizer) check(id spiffeid.ID) ([]string, bool) {
	own := a.own()
	misses := make([]string, 0, len(a.rules))
	for _, r := range a.rules {
		why := r.Miss(id, own)
		if why == "" {
			return nil, true
		}
		misses = append(misses, r.String()+": "+why)
	}
	return misses, false
}

// refuse logs one refused call.
func (a *Authorizer) refuse(ctx context.Context, method, caller string, misses []string) {
	addr := ""
	if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
		addr = p.Addr.String()
	}
	a.log.Warn("refused an unauthorized caller; to accept it, add a rule that matches its ID to the server's AUTHORIZED_IDS (Helm chart: spire.idScheme, spire.trustDomain)",
		"method", method, "caller", caller, "peer", addr, "missed", misses)
}

// CallerID is the SPIFFE ID of the client certificate of a call's ctx
// (for a server's checks beyond the rules); see callerID.
func CallerID(ctx context.Context) (spiffeid.ID, error) { return callerID(ctx) }

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

// Options parses rules and returns the server options that authorize by
// them, or none for an empty list (any verified caller is served).
func Options(rules []string, own TrustDomainFunc, logger *slog.Logger) ([]grpc.ServerOption, error) {
	if len(rules) == 0 {
		return nil, nil
	}
	parsed, err := ParseRules(rules)
	if err != nil {
		return nil, err
	}
	logger.Info("authorizing callers by SPIFFE ID", "rules", rules)
	return New(parsed, own, logger).ServerOptions(), nil
}
