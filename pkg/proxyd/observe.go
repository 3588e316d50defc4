package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// DebugState is what `proxy -debug` prints: the proxy's model and the
// kernel state of its namespace, as the running daemon sees them.
type DebugState struct {
	Version   string              `json:"version"`
	Config    *Config             `json:"config"`
	Proxy     proxy.Snapshot      `json:"proxy"`
	Dataplane *dataplane.Snapshot `json:"dataplane,omitempty"`
	// Services is the service load balancer (absent when it is off).
	Services *ServicesState `json:"services,omitempty"`
	// Goroutines is the process's goroutine count (a leak shows as growth
	// across the events a long-running proxy sees).
	Goroutines int    `json:"goroutines"`
	Error      string `json:"error,omitempty"`
}

// Version is set by cmd/proxy from its build information.
var Version = "dev"

func (d *Daemon) debugState() DebugState {
	st := DebugState{Version: Version, Config: d.cfg, Proxy: d.proxy.Snapshot(), Goroutines: runtime.NumGoroutine()}
	if d.services != nil {
		st.Services = d.services.state()
	}
	snap, err := d.dp.Snapshot()
	st.Dataplane = &snap
	if err != nil {
		st.Error = err.Error()
	}
	return st
}

// startMetrics serves the Prometheus endpoint (when an address is set).
func (d *Daemon) startMetrics(ctx context.Context) (func() error, error) {
	if d.cfg.MetricsAddress == "" {
		return noStop, nil
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), d.proxy)
	if d.services != nil {
		reg.MustRegister(d.services)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	lis, err := net.Listen("tcp", d.cfg.MetricsAddress)
	if err != nil {
		return nil, fmt.Errorf("listener %s: %w", d.cfg.MetricsAddress, err)
	}
	return d.serveHTTP(ctx, lis, mux, "metrics"), nil
}

// startDebugSocket serves the state that -debug prints (when a socket is
// set).
func (d *Daemon) startDebugSocket(ctx context.Context) (func() error, error) {
	if d.cfg.DebugSocket == "" {
		return noStop, nil
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/state", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.debugState())
	})
	_ = os.MkdirAll(filepath.Dir(d.cfg.DebugSocket), 0o755)
	_ = os.Remove(d.cfg.DebugSocket)
	lis, err := net.Listen("unix", d.cfg.DebugSocket)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.cfg.DebugSocket, err)
	}
	return d.serveHTTP(ctx, lis, mux, "debug"), nil
}

// serveHTTP serves h on lis until the returned stop, which shuts the
// server down (within a second) and waits for it.
func (d *Daemon) serveHTTP(ctx context.Context, lis net.Listener, h http.Handler, what string) func() error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	t := newTasks(ctx)
	t.Go(func(context.Context) {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "server", what, "error", err)
		}
	})
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return t.stop()
	}
}

// Debug is `proxy -debug`: it prints the state of the proxy running with
// cfg (asked on its debug socket, for at most 10 seconds) to w.
func Debug(ctx context.Context, cfg *Config, w io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return PrintDebug(ctx, cfg.DebugSocket, w)
}

// PrintDebug asks the running proxy listening on socket for its state and
// copies the JSON to w.
func PrintDebug(ctx context.Context, socket string, w io.Writer) error {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var dl net.Dialer
		return dl.DialContext(ctx, "unix", socket)
	}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://proxy/state", nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("ask the running proxy on %s (is it running?): %w", socket, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("debug socket %s answered %s", socket, resp.Status)
	}
	_, err = io.Copy(w, resp.Body)
	return err
}
