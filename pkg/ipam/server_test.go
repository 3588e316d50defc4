package ipam

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// serve starts the gRPC service of e on 127.0.0.1:0 and returns a client.
func serve(t testing.TB, e *Engine, m *RPCMetrics) ipamv1.IpamClient {
	return serveConns(t, e, m, 1)[0]
}

// serveConns is serve with n client connections.
func serveConns(t testing.TB, e *Engine, m *RPCMetrics, n int) []ipamv1.IpamClient {
	var opts []grpc.ServerOption
	if m != nil {
		opts = append(opts, grpc.UnaryInterceptor(m.UnaryInterceptor()))
	}
	srv := testutil.ServeGRPC(t, "", func(s *grpc.Server) { ipamv1.RegisterIpamServer(s, NewServer(e)) }, opts...)
	var out []ipamv1.IpamClient
	for i := 0; i < n; i++ {
		out = append(out, ipamv1.NewIpamClient(srv.Dial(t)))
	}
	return out
}

func req(name, trench, conduit, node string, f ipamv1.IPFamily) *ipamv1.Child {
	return &ipamv1.Child{Name: name, Subnet: &ipamv1.Subnet{
		Conduit:  &nspv1.Conduit{Name: conduit, Trench: &nspv1.Trench{Name: trench}},
		Node:     node,
		IpFamily: f,
	}}
}

func TestGRPCAllocateRelease(t *testing.T) {
	st := memory.New()
	e := newEngine(t, st, baseConfig())
	m := NewRPCMetrics()
	c := serve(t, e, m)
	ctx := context.Background()

	p, err := c.Allocate(ctx, req("bridge", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	assert.Equal(t, "169.255.0.1", p.GetAddress())
	assert.EqualValues(t, 24, p.GetPrefixLength())
	p, err = c.Allocate(ctx, req("bridge", testTrench, "c1", "w1", ipamv1.IPFamily_IPV6))
	require.NoError(t, err)
	assert.Equal(t, "fd00::1", p.GetAddress())
	assert.EqualValues(t, 64, p.GetPrefixLength())
	p, err = c.Allocate(ctx, req("p-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	assert.Equal(t, "169.255.0.2", p.GetAddress())
	p, err = c.Allocate(ctx, req("p-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	assert.Equal(t, "169.255.0.2", p.GetAddress(), "idempotent")

	for i := 0; i < 2; i++ {
		_, err = c.Release(ctx, req("p-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
		require.NoError(t, err, "release is idempotent")
	}
	_, err = c.Release(ctx, req("x", testTrench, "nope", "nope", ipamv1.IPFamily_IPV4))
	require.NoError(t, err, "release of unknown conduit is silent")
	p, err = c.Allocate(ctx, req("q-src", testTrench, "c1", "w1", ipamv1.IPFamily_IPV4))
	require.NoError(t, err)
	assert.Equal(t, "169.255.0.2", p.GetAddress(), "reused after release")

	_, err = c.Allocate(ctx, req("x", "wrong", "c1", "w1", ipamv1.IPFamily_IPV4))
	require.Error(t, err)

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e))
	require.NoError(t, reg.Register(m))
	got := testutil.Gather(t, reg)
	assert.Equal(t, 5.0, got[`causeway_ipam_rpc_requests_total{code="OK",method="/ipam.v1.Ipam/Allocate"}`])
	assert.Equal(t, 1.0, got[`causeway_ipam_rpc_requests_total{code="FailedPrecondition",method="/ipam.v1.Ipam/Allocate"}`])
	assert.Equal(t, 3.0, got[`causeway_ipam_rpc_requests_total{code="OK",method="/ipam.v1.Ipam/Release"}`])
	assert.Equal(t, 9.0, got[`causeway_ipam_rpc_duration_seconds_count{code="OK",method="/ipam.v1.Ipam/Allocate"}`]+
		got[`causeway_ipam_rpc_duration_seconds_count{code="OK",method="/ipam.v1.Ipam/Release"}`]+
		got[`causeway_ipam_rpc_duration_seconds_count{code="FailedPrecondition",method="/ipam.v1.Ipam/Allocate"}`])
	assert.Equal(t, 2.0, got[`causeway_ipam_allocations{conduit="c1",family="ipv4",node="w1",trench="trench-a"}`])
	assert.Equal(t, 1.0, got[`causeway_ipam_allocations{conduit="c1",family="ipv6",node="w1",trench="trench-a"}`])
	assert.Equal(t, 1.0, got[`causeway_ipam_conduits{family="ipv4",trench="trench-a"}`])
	assert.Positive(t, got[`causeway_ipam_store_committed_changes_total`])
}

func TestGRPCErrorCodes(t *testing.T) {
	st := memory.New()
	cfg := baseConfig()
	cfg.IPv4 = &FamilyConfig{Pool: netip.MustParsePrefix("10.0.0.0/28"), ConduitLength: 29, NodeLength: 30}
	cfg.IPv6 = nil // IPv4 only
	e := newEngine(t, st, cfg)
	c := serve(t, e, nil)
	ctx := context.Background()
	v4 := ipamv1.IPFamily_IPV4
	_, err := c.Allocate(ctx, req("a", testTrench, "c1", "w1", v4))
	require.NoError(t, err)

	long := strings.Repeat("x", MaxObjectNameLength+1)
	cases := []struct {
		name string
		req  *ipamv1.Child
		code codes.Code
	}{
		{"nil subnet", &ipamv1.Child{Name: "a"}, codes.InvalidArgument},
		{"nil conduit", &ipamv1.Child{Name: "a", Subnet: &ipamv1.Subnet{Node: "w1"}}, codes.InvalidArgument},
		{"nil trench", &ipamv1.Child{Name: "a", Subnet: &ipamv1.Subnet{Conduit: &nspv1.Conduit{Name: "c1"}}}, codes.InvalidArgument},
		{"empty child name", req("", testTrench, "c1", "w1", v4), codes.InvalidArgument},
		{"empty conduit name", req("a", testTrench, "", "w1", v4), codes.InvalidArgument},
		{"empty trench name", req("a", "", "c1", "w1", v4), codes.InvalidArgument},
		{"unknown family", req("a", testTrench, "c1", "w1", ipamv1.IPFamily(7)), codes.InvalidArgument},
		{"tab in child", req("a\tb", testTrench, "c1", "w1", v4), codes.InvalidArgument},
		{"DEL in child", req("a\x7f", testTrench, "c1", "w1", v4), codes.InvalidArgument},
		{"NUL in node", req("a", testTrench, "c1", "w\x001", v4), codes.InvalidArgument},
		{"space in conduit", req("a", testTrench, "c 1", "w1", v4), codes.InvalidArgument},
		{"non-ASCII node", req("a", testTrench, "c1", "wé", v4), codes.InvalidArgument},
		{"too long conduit", req("a", testTrench, long, "w1", v4), codes.InvalidArgument},
		{"too long child", req(strings.Repeat("y", MaxChildNameLength+1), testTrench, "c1", "w1", v4), codes.InvalidArgument},
		{"other trench", req("a", "trench-b", "c1", "w1", v4), codes.FailedPrecondition},
		{"family not served", req("a", testTrench, "c1", "w1", ipamv1.IPFamily_IPV6), codes.FailedPrecondition},
	}
	before := storedKeys(t, st)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Allocate(ctx, tc.req)
			assert.Equal(t, tc.code, status.Code(err), "Allocate: %v", err)
			_, err = c.Release(ctx, tc.req)
			assert.Equal(t, tc.code, status.Code(err), "Release: %v", err)
		})
	}
	require.NoError(t, e.Sync(ctx))
	assert.Equal(t, before, storedKeys(t, st), "bad input changes nothing")

	// Exhaustion: node (2 children), conduit (2 nodes), pool (2 conduits).
	_, err = c.Allocate(ctx, req("b", testTrench, "c1", "w1", v4))
	require.NoError(t, err)
	_, err = c.Allocate(ctx, req("c", testTrench, "c1", "w1", v4))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "node full: %v", err)
	_, err = c.Allocate(ctx, req("a", testTrench, "c1", "w2", v4))
	require.NoError(t, err)
	_, err = c.Allocate(ctx, req("a", testTrench, "c1", "w3", v4))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "conduit full: %v", err)
	_, err = c.Allocate(ctx, req("a", testTrench, "c2", "w1", v4))
	require.NoError(t, err)
	_, err = c.Allocate(ctx, req("a", testTrench, "c3", "w1", v4))
	assert.Equal(t, codes.ResourceExhausted, status.Code(err), "pool full: %v", err)

	// Store failure: Unavailable for changes; renewals still served.
	st.SetFailure(errors.New("disk gone"))
	_, err = c.Allocate(ctx, req("b", testTrench, "c2", "w1", v4))
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	_, err = c.Release(ctx, req("a", testTrench, "c2", "w1", v4))
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
	p, err := c.Allocate(ctx, req("a", testTrench, "c1", "w1", v4))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.1", p.GetAddress())
	st.SetFailure(nil)
	p, err = c.Allocate(ctx, req("b", testTrench, "c2", "w1", v4))
	require.NoError(t, err)
	assert.Equal(t, "10.0.0.10", p.GetAddress(), "the allocation tried while the store failed keeps its address")

	// Deadline while the store is down: the context's code.
	st.SetFailure(errors.New("disk gone"))
	dctx, cancel := context.WithTimeout(ctx, 0)
	defer cancel()
	_, err = c.Allocate(dctx, req("z", testTrench, "c2", "w1", v4))
	assert.Equal(t, codes.DeadlineExceeded, status.Code(err), "%v", err)
	st.SetFailure(nil)

	// After Close: Unavailable.
	e.Close()
	_, err = c.Allocate(ctx, req("a", testTrench, "c1", "w1", v4))
	assert.Equal(t, codes.Unavailable, status.Code(err), "%v", err)
}

func TestMetricsHandler(t *testing.T) {
	e := newEngine(t, memory.New(), baseConfig())
	alloc(t, e, sub(IPv4, "c1", "w1"), "bridge")
	reg := prometheus.NewRegistry()
	require.NoError(t, reg.Register(e))
	rec := httptest.NewRecorder()
	MetricsHandler(reg).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	assert.Equal(t, http.StatusOK, rec.Code)
	assert.Contains(t, rec.Body.String(), `causeway_ipam_allocations{conduit="c1",family="ipv4",node="w1",trench="trench-a"} 1`)
}
