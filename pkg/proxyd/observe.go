package proxyd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/causeway-net/causeway/internal/envload"
	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb/feed"
)

// DebugState is what `proxy -debug` prints: the proxy's model and the
// kernel state of its namespace, as the running daemon sees them.
type DebugState struct {
	Version   string              `json:"version"`
	Config    map[string]any      `json:"config"` // as in the starting line (envload.Map)
	Proxy     proxy.Snapshot      `json:"proxy"`
	Dataplane *dataplane.Snapshot `json:"dataplane,omitempty"`
	// Services is the service load balancer (absent when it is off).
	Services *feed.State `json:"services,omitempty"`
	// NexthopCheck is the datapath check of each LB nexthop
	// (docs/dataplane.md).
	NexthopCheck []nexthopcheck.Status `json:"nexthopCheck,omitempty"`
	// TargetCheck is the datapath check of each target (report only; with
	// NSM_TARGET_CHECK_INTERVAL).
	TargetCheck []nexthopcheck.Status `json:"targetCheck,omitempty"`
	// Goroutines is the process's goroutine count (a leak shows as growth
	// across the events a long-running proxy sees).
	Goroutines int `json:"goroutines"`
	// FDs is the process's count of open file descriptors (-1 if unknown).
	FDs int `json:"fds"`
	// Memory is the Go runtime's view of the process's memory.
	Memory MemoryState `json:"memory"`
	Error  string      `json:"error,omitempty"`
}

// MemoryState is the part of runtime.MemStats that says where a proxy's
// resident memory goes, in bytes.
type MemoryState struct {
	// HeapInuse is the bytes in in-use heap spans (live objects and the
	// fragmentation around them).
	HeapInuse uint64 `json:"heapInuse"`
	// HeapAlloc is the bytes of allocated heap objects.
	HeapAlloc uint64 `json:"heapAlloc"`
	// StackInuse is the goroutine stacks.
	StackInuse uint64 `json:"stackInuse"`
	// Sys is everything the runtime obtained from the OS.
	Sys uint64 `json:"sys"`
}

func memoryState() MemoryState {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return MemoryState{HeapInuse: ms.HeapInuse, HeapAlloc: ms.HeapAlloc, StackInuse: ms.StackInuse, Sys: ms.Sys}
}

// openFDs counts the process's open file descriptors, -1 when /proc is
// not readable.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	return len(ents) - 1 // the directory being read
}

// Version is set by cmd/proxy from its build information.
var Version = "dev"

func (d *Daemon) debugState() DebugState {
	st := DebugState{Version: Version, Config: envload.Map(d.cfg), Proxy: d.proxy.Snapshot(),
		Goroutines: runtime.NumGoroutine(), FDs: openFDs(), Memory: memoryState()}
	if d.services != nil {
		st.Services = d.services.State()
	}
	if d.hopCheck != nil {
		st.NexthopCheck = d.hopCheck.Statuses()
	}
	if d.targetCheck != nil {
		st.TargetCheck = d.targetCheck.Statuses()
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
	if d.hopCheck != nil {
		reg.MustRegister(newCheckMetrics(d.hopCheck, "nexthop", "out of its route unless the last of its family"))
	}
	if d.targetCheck != nil {
		reg.MustRegister(newCheckMetrics(d.targetCheck, "target", "reported only"))
	}
	if d.ledgerStats != nil {
		reg.MustRegister(newLedgerMetrics(d.ledgerStats))
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
// set), and Go's profiles under /debug/pprof/ (heap, goroutine, ...): the
// socket is the proxy's one way in for an operator on the node, so the
// profiles need no port of their own.
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
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	_ = os.MkdirAll(filepath.Dir(d.cfg.DebugSocket), 0o755)
	_ = os.Remove(d.cfg.DebugSocket)
	lis, err := net.Listen("unix", d.cfg.DebugSocket)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.cfg.DebugSocket, err)
	}
	return d.serveHTTP(ctx, lis, mux, "debug"), nil
}

// idleTimeout ends a kept-alive connection of the metrics and debug servers
// that has had no request for so long: a client that never closes its
// connections (a new transport per request) would otherwise hold a
// goroutine and a descriptor of the proxy each, for ever. It is longer than
// usual scrape intervals.
const idleTimeout = 2 * time.Minute

// serveHTTP serves h on lis until the returned stop, which shuts the
// server down (within a second) and waits for it.
func (d *Daemon) serveHTTP(ctx context.Context, lis net.Listener, h http.Handler, what string) func() error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second, IdleTimeout: idleTimeout}
	t := tasks.New(ctx)
	t.Go(func(context.Context) {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			d.log.Error("http server stopped", "server", what, "error", err)
		}
	})
	return func() error {
		sctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		return t.Stop()
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
	return GetDebug(ctx, socket, "/state", w)
}

// GetDebug copies what the running proxy listening on socket answers for
// path ("/state", "/debug/pprof/heap", "/debug/pprof/goroutine?debug=2",
// ...) to w.
func GetDebug(ctx context.Context, socket, path string, w io.Writer) error {
	// One request, one connection: closed when the answer is read, so
	// that no idle connection of this throw-away transport is left open
	// (and no goroutine of the proxy with it).
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var dl net.Dialer
			return dl.DialContext(ctx, "unix", socket)
		}}}
	defer c.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://proxy"+path, nil)
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
