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

// Server is a gRPC server on a unix socket, owned by whoever called Serve.
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
	s := &Server{
		URL:  &url.URL{Scheme: "unix", Path: path},
		path: path,
		srv:  grpc.NewServer(ServerOptions()...),
	}
	register(s.srv)
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := s.srv.Serve(ln); err != nil {
			slog.Warn("grpc server stopped", "socket", path, "error", err)
		}
	}()
	return s, nil
}

// Stop stops the server at once (open streams are cut, as when a process
// dies), waits for its goroutine and removes the socket file.
func (s *Server) Stop() {
	s.srv.Stop()
	s.wg.Wait()
	_ = os.Remove(s.path)
}
