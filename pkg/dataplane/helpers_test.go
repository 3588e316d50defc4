package dataplane

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/internal/testutil"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var (
	mp  = netip.MustParsePrefix
	ma  = netip.MustParseAddr
	ctx = context.Background()
)

// testWriter sends log lines to t.Log until the test ends.
type testWriter struct {
	mu   sync.Mutex
	t    testing.TB
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}

func testLogger(t testing.TB) *slog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		w.done = true
		w.mu.Unlock()
	})
	level := slog.LevelInfo
	if os.Getenv("DATAPLANE_DEBUG") != "" {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: level}))
}

// newDP starts a Dataplane in ns and closes it (without teardown) at the
// end of the test.
func newDP(t testing.TB, ns *testutil.NetNS, opts Options) *Dataplane {
	t.Helper()
	opts.NetNS = ns.Handle
	if opts.Logger == nil {
		opts.Logger = testLogger(t)
	}
	dp, err := New(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = dp.Close() })
	return dp
}

// handle returns a netlink handle in ns, closed at the end of the test.
func handle(t testing.TB, ns *testutil.NetNS) *netlink.Handle {
	t.Helper()
	h, err := netlink.NewHandleAt(ns.Handle)
	require.NoError(t, err)
	t.Cleanup(h.Close)
	return h
}

// vethPair creates name in ns with its peer peerName in peerNS (ns when
// nil), both up, and returns name's index.
func vethPair(t testing.TB, ns *testutil.NetNS, name string, peerNS *testutil.NetNS, peerName string) int {
	t.Helper()
	if peerNS == nil {
		ns.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", peerName)
		ns.MustExec(t, "ip", "link", "set", peerName, "up")
	} else {
		ns.MustExec(t, "ip", "link", "add", name, "type", "veth", "peer", "name", peerName, "netns", peerNS.Name)
		peerNS.MustExec(t, "ip", "link", "set", peerName, "up")
	}
	ns.MustExec(t, "ip", "link", "set", name, "up")
	return ns.LinkIndex(t, name)
}

// ownRules returns the prefixes of the rules into table with protocol.
func rulesOf(t testing.TB, h *netlink.Handle, table, proto int) []netip.Prefix {
	t.Helper()
	rules, err := h.RuleListFiltered(netlink.FAMILY_ALL, &netlink.Rule{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	var out []netip.Prefix
	for _, r := range rules {
		if int(r.Protocol) != proto {
			continue
		}
		p, ok := ipNetToPrefix(r.Src)
		require.True(t, ok, "rule without source: %v", r)
		out = append(out, p)
	}
	return out
}

// defaultRouteNexthops returns the nexthops of the default route of family
// f with proto in table (nil if there is none).
func defaultRouteNexthops(t testing.TB, h *netlink.Handle, f family, table, proto int) []netip.Addr {
	t.Helper()
	routes, err := h.RouteListFiltered(f.af(), &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	for i := range routes {
		r := &routes[i]
		if int(r.Protocol) == proto && isDefaultRoute(r) {
			nhs, _ := routeNexthops(r, r.LinkIndex)
			if len(r.MultiPath) > 0 {
				nhs, _ = routeNexthops(r, r.MultiPath[0].LinkIndex)
			}
			return nhs
		}
	}
	return nil
}

func eventually(t testing.TB, cond func() bool, msg string, args ...any) {
	t.Helper()
	require.Eventually(t, cond, time.Minute, 5*time.Millisecond, append([]any{msg}, args...)...)
}

// portsOf are the State ports of the given links, without attributes.
func portsOf(idx ...int) []Port {
	out := make([]Port, len(idx))
	for i, x := range idx {
		out[i] = Port{Index: x}
	}
	return out
}

// tiedPorts are ports with nexthops tied to them: ties maps a nexthop to
// the port it is reached through (one of ports).
func tiedPorts(ports []Port, ties map[netip.Addr]int) []Port {
	for a, idx := range ties {
		i := slices.IndexFunc(ports, func(p Port) bool { return p.Index == idx })
		ports[i].Nexthops = append(ports[i].Nexthops, a)
	}
	return ports
}

// indexes are the links of ports.
func indexes(ports []Port) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		out[i] = p.Index
	}
	return out
}
