package e2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/proxyd"
)

const (
	// echoPort is the targets' TCP and UDP echo port on the VIPs.
	echoPort = 5000
	// releaseDelay is the proxy's address release delay in the suite.
	releaseDelay = 2 * time.Second
	// nseExpiration is the LB stubs' registration lifetime in the suite, so
	// that a dead LB's registration expires soon.
	nseExpiration = 15 * time.Second
	// runBase keeps the suite's runs apart from interactive labs, whose
	// `lab down` picks the latest run of its base.
	runBase = "/run/causeway-e2e"
	// upTimeout bounds bringing a lab up on a loaded 2-core machine.
	upTimeout = 3 * time.Minute
	// waitLong bounds the polls for a state the system reaches by itself.
	waitLong = 60 * time.Second
	// poll is the period of those polls.
	poll = 100 * time.Millisecond
)

// testWriter sends lines to t.Log until the test's cleanup closes it.
type testWriter struct {
	t      *testing.T
	mu     sync.Mutex
	closed bool
	buf    bytes.Buffer
}

func newTestWriter(t *testing.T) *testWriter {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.buf.Len() > 0 {
			t.Log(strings.TrimRight(w.buf.String(), "\n"))
		}
		w.closed = true
	})
	return w
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return len(p), nil
	}
	w.buf.Write(p)
	for {
		line, err := w.buf.ReadString('\n')
		if err != nil {
			// Keep the incomplete line for the next write.
			rest := line
			w.buf.Reset()
			w.buf.WriteString(rest)
			return len(p), nil
		}
		w.t.Log(strings.TrimRight(line, "\n"))
	}
}

// newLab brings up a fresh lab with the suite's options, changed by mod,
// waits until the lab's own checks are green, and registers its teardown
// followed by the clean-up check (scenario 9).
func newLab(t *testing.T, mod func(*labrun.Options)) *labrun.Lab {
	return startLab(t, mod, true)
}

// startLab is newLab, waiting for green checks only when green is set.
func startLab(t *testing.T, mod func(*labrun.Options), green bool) *labrun.Lab {
	t.Helper()
	testutil.RequireRoot(t)
	if testing.Short() {
		t.Skip("end-to-end scenario: skipped under -short")
	}
	require.NotEmpty(t, binDir, "binaries were not built")
	before := snapshotHost(t)
	out := newTestWriter(t)
	opts := labrun.Options{
		BinDir:        binDir,
		RunBase:       runBase,
		ReleaseDelay:  releaseDelay,
		EchoPort:      echoPort,
		NSEExpiration: nseExpiration,
		Logger:        slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelWarn})),
		Stdout:        out,
	}
	if mod != nil {
		mod(&opts)
	}
	ctx, cancel := context.WithTimeout(context.Background(), upTimeout)
	defer cancel()
	start := time.Now()
	l, err := labrun.Up(ctx, opts)
	require.NoError(t, err, "lab up")
	t.Logf("lab %s up in %v", l.ID(), time.Since(start).Round(time.Millisecond))
	res := recordLab(t, l)
	ready := false
	var lastCheck bytes.Buffer
	lastFailed := ""
	t.Cleanup(func() {
		if t.Failed() && !ready {
			t.Log("last lab check:\n" + lastCheck.String())
		}
		if t.Failed() {
			var st bytes.Buffer
			_, _ = l.Status(&st)
			t.Log("lab status at failure:\n" + st.String())
			for _, lb := range l.LBs() {
				for _, cmd := range [][]string{{"ip", "route"}, {"ip", "-6", "route"}, {"sysctl", "net.ipv4.fib_multipath_hash_policy", "net.ipv6.fib_multipath_hash_policy"}} {
					out, _ := l.Exec(lb, cmd...)
					t.Logf("%s: %v:\n%s", lb, cmd, out)
				}
			}
			for _, role := range append([]string{"proxy"}, append(l.LBs(), l.Targets()...)...) {
				out, _ := l.Exec(role, "ip", "neigh")
				cache, _ := l.Exec(role, "ip", "-6", "route", "show", "cache")
				t.Logf("%s: ip neigh:\n%s\nIPv6 route cache:\n%s", role, out, cache)
			}
			for _, c := range []string{"proxy", "ipam", "nsp", "lb-a", "target-1"} {
				t.Logf("%s log (tail):\n%s", c, tail(logOf(l, c), 15))
			}
		}
		require.NoError(t, l.Down(), "lab down")
		assertClean(t, res, before)
	})
	if !green {
		ready = true
		return l
	}
	// Up returns once the proxy is registered; the targets connect in the
	// background. The lab's own checks tell when all of it is up.
	require.Eventually(t, func() bool {
		r, err := l.Check(ctx)
		lastCheck.Reset()
		if err != nil {
			lastCheck.WriteString(err.Error())
			return false
		}
		r.Print(&lastCheck)
		if !r.OK() {
			var failed []string
			for _, row := range r.Failed() {
				failed = append(failed, fmt.Sprintf("%+v", row))
			}
			if msg := strings.Join(failed, "\n"); msg != lastFailed {
				t.Logf("lab %s: checks not green yet:\n%s", l.ID(), msg)
				lastFailed = msg
			}
		}
		return r.OK()
	}, upTimeout, time.Second, "lab checks green")
	ready = true
	t.Logf("FIGURE: lab up to all checks green: %v (lab %s, binaries prebuilt)", time.Since(start).Round(time.Millisecond), l.ID())
	return l
}

// logOf is the content of a component's log.
func logOf(l *labrun.Lab, component string) string {
	b, _ := os.ReadFile(l.Logs(component))
	return string(b)
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// vips are the lab's VIP addresses, IPv4 first.
func vips(l *labrun.Lab) []netip.Addr {
	var out []netip.Addr
	for _, p := range l.VIPs() {
		out = append(out, p.Addr())
	}
	return out
}

// vipOf is the lab's first VIP of the family (IPv4 when v4).
func vipOf(t *testing.T, l *labrun.Lab, v4 bool) netip.Addr {
	t.Helper()
	for _, a := range vips(l) {
		if a.Is4() == v4 {
			return a
		}
	}
	t.Fatalf("lab has no VIP of the family (v4=%v): %v", v4, l.VIPs())
	return netip.Addr{}
}

// proxyState asks the running proxy for its state (proxy -debug).
func proxyState(ctx context.Context, l *labrun.Lab) (proxyd.DebugState, error) {
	var st proxyd.DebugState
	raw, err := l.ProxyDebug(ctx)
	if err != nil {
		return st, err
	}
	err = json.Unmarshal(raw, &st)
	return st, err
}

// lbNexthops are the load balancer addresses the proxy routes VIP traffic
// over right now (its effective nexthops).
func lbNexthops(ctx context.Context, l *labrun.Lab) ([]netip.Addr, error) {
	st, err := proxyState(ctx, l)
	if err != nil {
		return nil, err
	}
	if st.Dataplane == nil {
		return nil, nil
	}
	return st.Dataplane.EffectiveNexthops, nil
}

// lbNeighbors are the addresses of the LB ends of the proxy's LB
// interfaces, by connection id.
func lbNeighbors(ctx context.Context, l *labrun.Lab) (map[string][]netip.Addr, error) {
	st, err := proxyState(ctx, l)
	if err != nil {
		return nil, err
	}
	m := map[string][]netip.Addr{}
	for _, i := range st.Proxy.Interfaces {
		if i.Type.String() == "lb" {
			m[i.ConnKey] = append(m[i.ConnKey], i.NeighborAddrs...)
		}
	}
	return m, nil
}

// targetAddrs are the addresses of every target.
func targetAddrs(l *labrun.Lab) map[string][]netip.Prefix {
	m := map[string][]netip.Prefix{}
	for _, name := range l.Targets() {
		m[name] = l.TargetAddrs(name)
	}
	return m
}

// note is the last state a poll saw, for the failure message of
// require.Eventually (which formats its arguments after the poll).
type note struct {
	mu sync.Mutex
	s  string
}

func (n *note) set(format string, args ...any) {
	n.mu.Lock()
	n.s = fmt.Sprintf(format, args...)
	n.mu.Unlock()
}

func (n *note) String() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.s
}
