package credentials

import (
	"context"

	"google.golang.org/grpc"
	grpccreds "google.golang.org/grpc/credentials"
)

// plaintextCreds lets per-RPC credentials travel over a plaintext
// connection, which gRPC otherwise refuses.
type plaintextCreds struct {
	grpccreds.PerRPCCredentials
}

func (plaintextCreds) RequireTransportSecurity() bool { return false }

// relaxLast rewraps the last per-RPC credentials call option (the default
// token, or one an SDK element such as sendfd has rewrapped) so that it is
// accepted without transport security.
func relaxLast(opts []grpc.CallOption) []grpc.CallOption {
	for i := len(opts) - 1; i >= 0; i-- {
		if o, ok := opts[i].(grpc.PerRPCCredsCallOption); ok {
			return append(opts, grpc.PerRPCCredentials(plaintextCreds{o.Creds}))
		}
	}
	return opts
}

func plaintextTokens() []grpc.DialOption {
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			return invoker(ctx, method, req, reply, cc, relaxLast(opts)...)
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			return streamer(ctx, desc, cc, method, relaxLast(opts)...)
		}),
	}
}
