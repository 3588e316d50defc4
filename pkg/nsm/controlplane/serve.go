package controlplane

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"

	"google.golang.org/grpc"
)

// Server is a gRPC server on a unix socket or a TCP address, owned by
// whoever called Serve or ServeTCP.
type Server struct {
	URL  *url.URL
	path string
	srv  *grpc.Server
	wg   sync.WaitGroup
}

// Serve listens on the unix socket at path (replacing a stale socket file),
// registers the services with register and serves them until Stop.
func Serve(path string, register func(*grpc.Server)) (*Server, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create socket dir for %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	return serveOn(ln, &url.URL{Scheme: "unix", Path: path}, path, register), nil
}

// ServeTCP listens on the TCP address addr (host:port, port 0 for any) and
// serves like Serve; the URL is tcp://<the address bound>. An NSMgr is
// served there for the forwarders of other nodes; the registry shared by
// the nodes is served there too.
func ServeTCP(addr string, register func(*grpc.Server)) (*Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", addr, err)
	}
	return serveOn(ln, &url.URL{Scheme: "tcp", Host: ln.Addr().String()}, "", register), nil
}

// serveOn serves on ln until Stop; path is the socket file to remove then.
func serveOn(ln net.Listener, u *url.URL, path string, register func(*grpc.Server)) *Server {
	s := &Server{URL: u, path: path, srv: grpc.NewServer(ServerOptions()...)}
	register(s.srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil {
			slog.Warn("grpc server stopped", "address", u.String(), "error", err)
		}
	}()
	return s
}

// Stop stops the server at once (open streams are cut, as when a process
// dies), waits for its goroutine and removes the socket file.
func (s *Server) Stop() {
	s.srv.Stop()
	s.wg.Wait()
	if s.path != "" {
		_ = os.Remove(s.path)
	}
}
