package testutil

import (
	"net"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// GRPCServer is a gRPC server on a loopback TCP port for the length of a
// test.
type GRPCServer struct {
	*grpc.Server
	// Addr is the listener's address (host:port on TCP).
	Addr string
	once sync.Once
	done chan struct{}
}

// ServeGRPC serves, with the services register adds, on addr (empty:
// 127.0.0.1 and a free port) until Stop or the end of the test. A cleanup
// that the test registers after ServeGRPC runs before the server stops.
func ServeGRPC(t testing.TB, addr string, register func(*grpc.Server), opts ...grpc.ServerOption) *GRPCServer {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("gRPC test server: %v", err)
	}
	return ServeGRPCOn(t, lis, register, opts...)
}

// ServeGRPCOn is ServeGRPC on a listener of the caller's (a unix socket);
// the server closes lis when it stops.
func ServeGRPCOn(t testing.TB, lis net.Listener, register func(*grpc.Server), opts ...grpc.ServerOption) *GRPCServer {
	t.Helper()
	s := &GRPCServer{Server: grpc.NewServer(opts...), Addr: lis.Addr().String(), done: make(chan struct{})}
	if register != nil {
		register(s.Server)
	}
	go func() {
		defer close(s.done)
		_ = s.Serve(lis)
	}()
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server at once (its streams end) and waits for it; it may
// be called more than once.
func (s *GRPCServer) Stop() {
	s.once.Do(func() {
		s.Server.Stop()
		<-s.done
	})
}

// Dial returns a plaintext client connection to the server (opts come
// after the plaintext credentials), closed at the end of the test.
func (s *GRPCServer) Dial(t testing.TB, opts ...grpc.DialOption) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(s.Addr, append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials())}, opts...)...)
	if err != nil {
		t.Fatalf("dial the gRPC test server: %v", err)
	}
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}
