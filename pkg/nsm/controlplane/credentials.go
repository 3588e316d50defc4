package controlplane

import (
	"fmt"
	"time"

	"github.com/edwarnicke/grpcfd"
	"github.com/golang-jwt/jwt/v4"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/networkservicemesh/sdk/pkg/tools/token"

	nsmcreds "github.com/causeway-net/causeway/pkg/nsm/credentials"
	"github.com/causeway-net/causeway/pkg/nsm/sdkreplacement/authorize"
)

// DefaultTokenLifetime is the lifetime of the lab's tokens. It is far above
// any request timeout, so the NSE's timeout element never closes a fresh
// connection (nsm-sdk gotcha G2).
const DefaultTokenLifetime = 10 * time.Minute

// labSigningKey signs the lab's JWTs. Nothing verifies them (authorize.Any),
// the registry only reads their claims, so the key is not a secret.
var labSigningKey = []byte("causeway-lab")

// TokenGenerator returns a generator of HS256 JWTs with subject
// spiffe://causeway.lab/<name>, valid for lifetime (DefaultTokenLifetime when
// zero). Only peers that authorize anything accept them.
func TokenGenerator(name string, lifetime time.Duration) token.GeneratorFunc {
	if lifetime <= 0 {
		lifetime = DefaultTokenLifetime
	}
	subject := "spiffe://causeway.lab/" + name
	return func(credentials.AuthInfo) (string, time.Time, error) {
		expires := time.Now().Add(lifetime)
		claims := jwt.RegisteredClaims{Subject: subject, ExpiresAt: jwt.NewNumericDate(expires)}
		tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(labSigningKey)
		if err != nil {
			return "", time.Time{}, fmt.Errorf("sign lab token for %s: %w", subject, err)
		}
		return tok, expires, nil
	}
}

// plaintextPerRPC lets token credentials travel over an insecure transport.
type plaintextPerRPC struct{ credentials.PerRPCCredentials }

func (plaintextPerRPC) RequireTransportSecurity() bool { return false }

// DialOptions are the client options of the lab: plaintext transport able to
// pass file descriptors over unix sockets (grpcfd), per-RPC tokens from gen,
// and wait-for-ready calls.
func DialOptions(gen token.GeneratorFunc) []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithTransportCredentials(grpcfd.TransportCredentials(insecure.NewCredentials())),
		grpc.WithDefaultCallOptions(
			grpc.PerRPCCredentials(plaintextPerRPC{token.NewPerRPCCredentials(gen)}),
		),
		grpcfd.WithChainStreamInterceptor(),
		grpcfd.WithChainUnaryInterceptor(),
	}
}

// ServerOptions are the server options of the lab: plaintext transport able
// to receive and send file descriptors over unix sockets.
func ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.Creds(grpcfd.TransportCredentials(insecure.NewCredentials())),
	}
}

// security is how one client or endpoint talks to NSM: its token
// generator, dial and server options and authorization elements.
type security struct {
	gen        token.GeneratorFunc
	dial       []grpc.DialOption
	server     []grpc.ServerOption
	authServer networkservice.NetworkServiceServer
	authClient networkservice.NetworkServiceClient
}

// securityOf is the lab's own security (unverified tokens for name over
// plaintext, anything authorized) when creds is nil, and otherwise creds'
// (SPIFFE mTLS, signed tokens, the SDK's default policies: a stub run as a
// pod of a cluster whose NSM is secure).
func securityOf(name string, lifetime time.Duration, creds *nsmcreds.Credentials) security {
	if creds == nil {
		gen := TokenGenerator(name, lifetime)
		return security{
			gen: gen, dial: DialOptions(gen), server: ServerOptions(),
			authServer: authorize.NewServer(authorize.Any()), authClient: authorize.NewClient(authorize.Any()),
		}
	}
	return security{
		gen: creds.TokenGenerator(), dial: creds.NSMDialOptions(), server: creds.NSMServerOptions(),
		authServer: creds.AuthorizeServer(), authClient: creds.AuthorizeClient(),
	}
}
