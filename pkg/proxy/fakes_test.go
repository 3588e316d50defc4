package proxy

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
)

// fakeIPAM is a small IPAM server: each (trench, conduit, node, family) gets
// a node subnet (172.16.<n>.0/24, fd00:0:0:<n>::/64), children are carved
// first-fit from it (never the first or last address), idempotent by name.
// hook, if set, runs before every call and may fail or block it.
type fakeIPAM struct {
	ipamv1.UnimplementedIpamServer

	mu       sync.Mutex
	nodes    map[string]*fakeNode
	nextNode map[ipamv1.IPFamily]int
	calls    []string // "Allocate <family>/<name>" / "Release <family>/<name>"
	hook     func(ctx context.Context, method string, c *ipamv1.Child) error
	latency  time.Duration
	wide     bool // IPv4 node subnets are /16 (10.<n>.0.0/16), for benchmarks
}

type fakeNode struct {
	subnet netip.Prefix
	byName map[string]netip.Addr
	used   map[netip.Addr]bool
	hint   netip.Addr // no free address below it
}

func newFakeIPAM() *fakeIPAM { return &fakeIPAM{nodes: map[string]*fakeNode{}} }

// nextNodeIndex numbers node subnets per family, so that the subnets do not
// depend on the order in which families are first asked for.
func (f *fakeIPAM) nextNodeIndex(fam ipamv1.IPFamily) int {
	if f.nextNode == nil {
		f.nextNode = map[ipamv1.IPFamily]int{}
	}
	i := f.nextNode[fam]
	f.nextNode[fam]++
	return i
}

func nodeKey(s *ipamv1.Subnet) string {
	return fmt.Sprintf("%s/%s/%s/%d", s.GetConduit().GetTrench().GetName(), s.GetConduit().GetName(),
		s.GetNode(), s.GetIpFamily())
}

func (f *fakeIPAM) setHook(h func(ctx context.Context, method string, c *ipamv1.Child) error) {
	f.mu.Lock()
	f.hook = h
	f.mu.Unlock()
}

func (f *fakeIPAM) before(ctx context.Context, method string, c *ipamv1.Child) error {
	f.mu.Lock()
	h, lat := f.hook, f.latency
	f.calls = append(f.calls, method+" "+c.GetSubnet().GetIpFamily().String()+"/"+c.GetName())
	f.mu.Unlock()
	if lat > 0 {
		time.Sleep(lat)
	}
	if h != nil {
		return h(ctx, method, c)
	}
	return nil
}

func (f *fakeIPAM) Allocate(ctx context.Context, c *ipamv1.Child) (*ipamv1.Prefix, error) {
	if err := f.before(ctx, "Allocate", c); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	a, bits, err := f.allocateLocked(c.GetSubnet(), c.GetName())
	if err != nil {
		return nil, err
	}
	return &ipamv1.Prefix{Address: a.String(), PrefixLength: int32(bits)}, nil
}

func (f *fakeIPAM) allocateLocked(s *ipamv1.Subnet, name string) (netip.Addr, int, error) {
	k := nodeKey(s)
	n := f.nodes[k]
	if n == nil {
		i := f.nextNodeIndex(s.GetIpFamily())
		var sub netip.Prefix
		if s.GetIpFamily() == ipamv1.IPFamily_IPV4 && f.wide {
			sub = netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", i))
		} else if s.GetIpFamily() == ipamv1.IPFamily_IPV4 {
			sub = netip.MustParsePrefix(fmt.Sprintf("172.16.%d.0/24", i))
		} else {
			sub = netip.MustParsePrefix(fmt.Sprintf("fd00:0:0:%x::/64", i))
		}
		n = &fakeNode{subnet: sub, byName: map[string]netip.Addr{}, used: map[netip.Addr]bool{}}
		f.nodes[k] = n
	}
	if a, ok := n.byName[name]; ok {
		return a, n.subnet.Bits(), nil
	}
	if !n.hint.IsValid() {
		n.hint = n.subnet.Addr().Next()
	}
	for a := n.hint; n.subnet.Contains(a.Next()); a = a.Next() {
		if !n.used[a] {
			n.used[a] = true
			n.byName[name] = a
			n.hint = a.Next()
			return a, n.subnet.Bits(), nil
		}
	}
	return netip.Addr{}, 0, errors.New("node subnet full")
}

func (f *fakeIPAM) Release(ctx context.Context, c *ipamv1.Child) (*emptypb.Empty, error) {
	if err := f.before(ctx, "Release", c); err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if n := f.nodes[nodeKey(c.GetSubnet())]; n != nil {
		if a, ok := n.byName[c.GetName()]; ok {
			delete(n.byName, c.GetName())
			delete(n.used, a)
			if a.Less(n.hint) {
				n.hint = a
			}
		}
	}
	return &emptypb.Empty{}, nil
}

// children lists the allocated "<family>/<name>" children of all nodes.
func (f *fakeIPAM) children() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, n := range f.nodes {
		fam := ipamv1.IPFamily_IPV4.String()
		if n.subnet.Addr().Is6() {
			fam = ipamv1.IPFamily_IPV6.String()
		}
		for name := range n.byName {
			out = append(out, fam+"/"+name)
		}
	}
	slices.Sort(out)
	return out
}

func (f *fakeIPAM) callLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeIPAM) countCalls(call string) int {
	n := 0
	for _, c := range f.callLog() {
		if c == call {
			n++
		}
	}
	return n
}

// dropNodes forgets every node subnet, as after a trench re-creation: the
// next allocations come from new subnets.
func (f *fakeIPAM) dropNodes() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nodes = map[string]*fakeNode{}
}

// serveIPAM serves srv over bufconn and returns a client; everything is
// stopped at the end of the test.
func serveIPAM(t testing.TB, srv ipamv1.IpamServer, opts ...grpc.ServerOption) ipamv1.IpamClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	testutil.ServeGRPCOn(t, lis, func(s *grpc.Server) { ipamv1.RegisterIpamServer(s, srv) }, opts...)
	cc, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }),
		grpc.WithTransportCredentials(insecure.NewCredentials()))
	require.NoError(t, err)
	t.Cleanup(func() { _ = cc.Close() })
	return ipamv1.NewIpamClient(cc)
}

// fakeDataplane is the project's fake dataplane with the wait the proxy's
// tests make on it.
type fakeDataplane struct{ *dataplanefake.Dataplane }

func newFakeDataplane() fakeDataplane { return fakeDataplane{&dataplanefake.Dataplane{}} }

// indexes are the links of ports.
func indexes(ports []dataplane.Port) []int {
	out := make([]int, len(ports))
	for i, p := range ports {
		out[i] = p.Index
	}
	return out
}

// hairpinPorts are the ports of s in hairpin mode.
func hairpinPorts(s dataplane.State) []int {
	var out []int
	for _, p := range s.Ports {
		if p.Hairpin {
			out = append(out, p.Index)
		}
	}
	return out
}

// nexthopPorts maps each nexthop tied to a port of s to that port.
func nexthopPorts(s dataplane.State) map[netip.Addr]int {
	out := map[netip.Addr]int{}
	for _, p := range s.Ports {
		for _, a := range p.Nexthops {
			out[a] = p.Index
		}
	}
	return out
}

// retired lists the State.Remove links of the applied states, in order.
func (d fakeDataplane) retired() []string {
	var out []string
	for _, s := range d.States() {
		for _, l := range s.Remove {
			out = append(out, fmt.Sprintf("%d/%s", l.Index, l.Name))
		}
	}
	return out
}

// waitState waits until the last applied state satisfies ok.
func (d fakeDataplane) waitState(t *testing.T, ok func(dataplane.State) bool) dataplane.State {
	t.Helper()
	var s dataplane.State
	require.Eventually(t, func() bool {
		var have bool
		s, have = d.Last()
		return have && ok(s)
	}, waitFor, tick, "dataplane never reached the expected state")
	return s
}

// fakeClock fires its timers only when advanced.
type fakeClock = clock.Fake

const (
	waitFor = 30 * time.Second
	tick    = 5 * time.Millisecond
)

func testLogger() *slog.Logger {
	if os.Getenv("PROXY_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

type dataplaneState = dataplane.State

func sprint(v any) string { return fmt.Sprint(v) }

// callHook is a settable failure/blocking hook run by a gRPC interceptor in
// front of any IPAM server (used with the real engine).
type callHook struct {
	mu sync.Mutex
	f  func(ctx context.Context, method string, c *ipamv1.Child) error
}

func (h *callHook) set(f func(ctx context.Context, method string, c *ipamv1.Child) error) {
	h.mu.Lock()
	h.f = f
	h.mu.Unlock()
}

func (h *callHook) option() grpc.ServerOption {
	return grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo,
		handler grpc.UnaryHandler) (any, error) {
		h.mu.Lock()
		f := h.f
		h.mu.Unlock()
		if c, ok := req.(*ipamv1.Child); ok && f != nil {
			method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
			if err := f(ctx, method, c); err != nil {
				return nil, err
			}
		}
		return handler(ctx, req)
	})
}
