package proxy

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testEnv is a proxy on a fake IPAM (over bufconn), a fake dataplane and a
// fake clock.
type testEnv struct {
	ipam *fakeIPAM
	dp   fakeDataplane
	clk  *fakeClock
	p    *Proxy
}

func newTestEnv(t *testing.T, mod ...func(*Config)) *testEnv {
	t.Helper()
	e := &testEnv{ipam: newFakeIPAM(), dp: newFakeDataplane(), clk: &fakeClock{}}
	cfg := Config{
		Conduit:       "conduit-a",
		Trench:        "trench-a",
		Node:          "worker-1",
		IPAM:          serveIPAM(t, e.ipam),
		Dataplane:     e.dp,
		RetryInterval: 1e6, // 1ms
		Logger:        testLogger(),
		Clock:         e.clk,
	}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(context.Background(), cfg)
	require.NoError(t, err)
	e.p = p
	t.Cleanup(func() { require.NoError(t, p.Close(context.Background())) })
	return e
}

func lbConn(id string) *networkservice.Connection {
	return &networkservice.Connection{Id: id}
}

// targetConn is a connection as the proxy's NSE sees it: its own id differs
// from the target's path segment id, which is the key.
func targetConn(segID string) *networkservice.Connection {
	return &networkservice.Connection{
		Id: "nse-side-" + segID,
		Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{
			{Id: segID}, {Id: "nsmgr"}, {Id: "nse-side-" + segID},
		}},
	}
}

func ipcOf(c *networkservice.Connection) *networkservice.IPContext {
	return c.GetContext().GetIpContext()
}

func TestNewAllocatesBridgeInFamilyOrder(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		// Reversed on purpose: the order is always IPv4 then IPv6.
		c.Families = []ipamv1.IPFamily{ipamv1.IPFamily_IPV6, ipamv1.IPFamily_IPV4}
	})
	require.Equal(t, []string{"Allocate IPV4/bridge", "Allocate IPV6/bridge"}, e.ipam.callLog())
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.BridgeAddrs) == 2 })
	require.Equal(t, "[172.16.0.1/24 fd00::1/64]", sprint(s.BridgeAddrs))
}
