// Package nsmpod runs the test cluster's own NSM component, the project's
// veth forwarder (test/kube/images/forwarder), as a pod: its SPIFFE
// credentials from the node's SPIRE agent, its gRPC servers, and its life
// until the kubelet stops it. The forwarder's logic is the project's
// (pkg/forwarder); the image's command only wires it. NSM's nsmgr and
// registry are NSM's own commands (scripts/cluster/sources.sh).
package nsmpod

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"google.golang.org/grpc"

	"github.com/causeway-net/causeway/pkg/nsm/credentials"
)

// TokenLifetime of the components' NSM tokens (NSM's default).
const TokenLifetime = 10 * time.Minute

// Component is what a command starts: it registers its services on the
// servers it makes with Pod.Serve and returns when it is up.
type Component func(ctx context.Context, p *Pod) error

// Pod is a running component's environment.
type Pod struct {
	Creds   *credentials.Credentials
	wg      sync.WaitGroup
	srvs    []*grpc.Server
	sockets []ownSocket
	onStop  []func(context.Context)
}

// ownSocket is a unix socket file the pod made, removed when the pod stops
// only if it is still the file it made: the next pod of a DaemonSet may
// have made its own at the same path by then.
type ownSocket struct {
	path string
	file os.FileInfo
}

// OnStop has fn run when the component stops, after its servers have
// stopped, in reverse order of the calls.
func (p *Pod) OnStop(fn func(context.Context)) { p.onStop = append(p.onStop, fn) }

// Run runs component until SIGTERM or SIGINT and returns the exit code.
// The SPIFFE credentials come from the Workload API at
// SPIFFE_ENDPOINT_SOCKET.
func Run(name string, component Component) int {
	slog.SetDefault(slog.New(slog.NewJSONHandler(os.Stderr, nil)).With("component", name))
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := run(ctx, component); err != nil {
		slog.Error("stopped", "error", err)
		return 1
	}
	return 0
}

func run(ctx context.Context, component Component) error {
	creds, err := credentials.FromWorkloadAPI(ctx, TokenLifetime, nil)
	if err != nil {
		return fmt.Errorf("credentials: %w", err)
	}
	defer creds.Close()
	p := &Pod{Creds: creds}
	defer p.stop()
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := component(cctx, p); err != nil {
		return err
	}
	slog.Info("up")
	<-ctx.Done()
	return nil
}

// Serve serves a gRPC server with the component's NSM transport (SPIFFE
// mTLS, file descriptors over unix sockets) on network ("unix" or "tcp")
// and address, with register's services, until the component stops. A unix
// socket left by an earlier run is replaced; a new one is open to every user.
func (p *Pod) Serve(network, address string, register func(*grpc.Server)) error {
	if network == "unix" {
		if err := os.MkdirAll(filepath.Dir(address), 0o750); err != nil {
			return fmt.Errorf("socket directory: %w", err)
		}
		if err := os.Remove(address); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("stale socket: %w", err)
		}
	}
	ln, err := net.Listen(network, address)
	if err != nil {
		return fmt.Errorf("listen %s %s: %w", network, address, err)
	}
	if ul, ok := ln.(*net.UnixListener); ok {
		ul.SetUnlinkOnClose(false) // stop removes it, if still ours
		// Clients of any user may connect (the chart's proxy runs as uid
		// 10005): who they are is checked by SPIFFE mTLS, not by the file.
		file, err := os.Stat(address)
		if err == nil {
			err = os.Chmod(address, 0o666)
		}
		if err != nil {
			ln.Close()
			return fmt.Errorf("socket %s: %w", address, err)
		}
		p.sockets = append(p.sockets, ownSocket{path: address, file: file})
	}
	srv := grpc.NewServer(p.Creds.NSMServerOptions()...)
	register(srv)
	p.srvs = append(p.srvs, srv)
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		if err := srv.Serve(ln); err != nil {
			slog.Warn("server stopped", "address", address, "error", err)
		}
	}()
	return nil
}

// stop stops the servers first, so that a component on its way out takes
// no new request (a new NSMgr would route heals through a forwarder that
// is about to go, and its going would then tear the healed connections
// down), waits for them, removes its sockets, then runs the OnStop
// functions.
func (p *Pod) stop() {
	for _, s := range p.srvs {
		s.Stop()
	}
	p.wg.Wait()
	for _, s := range p.sockets {
		if now, err := os.Stat(s.path); err == nil && os.SameFile(now, s.file) {
			_ = os.Remove(s.path)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i := len(p.onStop) - 1; i >= 0; i-- {
		p.onStop[i](ctx)
	}
}

// Env returns the environment variable key, or def when it is empty.
func Env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}
