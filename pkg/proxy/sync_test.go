package proxy

import (
	"encoding/json"
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/stretchr/testify/require"
)

// TestDataplaneAppliesAreSerializedAndCoalesced: changes made while an
// Apply runs are pushed in one more Apply with the latest state; Apply
// never runs twice at once.
func TestDataplaneAppliesAreSerializedAndCoalesced(t *testing.T) {
	e := newTestEnv(t)
	e.dp.waitState(t, func(s dataplaneState) bool { return len(s.BridgeAddrs) == 2 })
	gate := make(chan struct{})
	entered := make(chan struct{}, 10)
	e.dp.Gate(gate, entered)

	lb := lbConn("lb")
	require.NoError(t, e.p.SetIPContext(t.Context(), lb, LBConn))
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")}))
	<-entered // the first Apply is running
	require.NoError(t, e.p.SetVIPs([]netip.Prefix{netip.MustParsePrefix("20.0.0.2/32")}))
	e.p.InterfaceCreated(Interface{Index: 4, Name: "lb", Type: LBConn, ConnKey: "lb"})
	e.p.InterfaceCreated(Interface{Index: 5, Name: "tg", Type: TargetConn, ConnKey: "tg"})
	e.p.InterfaceDeleted(Interface{Index: 5})
	gate <- struct{}{} // finish the first
	<-entered          // one more, with everything
	gate <- struct{}{}
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 1 })
	require.Equal(t, "[20.0.0.2/32]", sprint(s.VIPs))
	require.Equal(t, lbSide(t, lb), s.Nexthops)

	require.Len(t, e.dp.States(), 3, "initial, first change, coalesced rest")
	require.Equal(t, 1, e.dp.MaxConcurrentApplies())
	require.Empty(t, entered)
	e.dp.Gate(nil, nil)
}

func TestStatsAndSnapshot(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.p.SetIPContext(t.Context(), lbConn("lb-1"), LBConn))
	require.NoError(t, e.p.SetIPContext(t.Context(), targetConn("t1"), TargetConn))
	require.NoError(t, e.p.UnsetIPContext(t.Context(), lbConn("gone"), LBConn))
	e.p.InterfaceCreated(Interface{Index: 3, Name: "nsm-lb", Type: LBConn, ConnKey: "lb-1"})
	require.Error(t, e.p.SetVIPs(prefixes("20.0.0.1/32", "0.0.0.0/0")))

	st := e.p.Stats()
	require.Equal(t, 2, st.Connections)
	require.Equal(t, 2+8, st.Allocations)
	require.Equal(t, 1, st.PendingReleases)
	require.Equal(t, 1, st.Ports)
	require.Equal(t, 2, st.Nexthops, "the LB's two addresses")
	require.Equal(t, 1, st.VIPs)
	require.Equal(t, uint64(1), st.VIPsRejected)

	snap := e.p.Snapshot()
	raw, err := json.Marshal(snap)
	require.NoError(t, err)
	var back map[string]any
	require.NoError(t, json.Unmarshal(raw, &back))
	require.Equal(t, "conduit-a", back["conduit"])
	require.Len(t, back["connections"], 3)
	require.Contains(t, string(raw), `"IPV4/lb-1-dst":"172.16.0.3/24"`)
	require.Contains(t, string(raw), `"Type":"lb"`)
	require.Contains(t, string(raw), `"pendingRelease":true`)
}

func TestPrometheusCollector(t *testing.T) {
	e := newTestEnv(t)
	require.NoError(t, e.p.SetIPContext(t.Context(), lbConn("lb-1"), LBConn))
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(e.p))
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			require.Equal(t, "conduit-a", m.GetLabel()[0].GetValue())
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	require.Len(t, got, len(proxyMetrics))
	require.Equal(t, 6.0, got["causeway_proxy_allocations"])
	require.Equal(t, 1.0, got["causeway_proxy_connections"])
	require.Equal(t, 0.0, got["causeway_proxy_rollbacks_total"])
}

// ReleaseLeftovers ends the dataplane's hold in the desired state, from
// the next Apply on and in every later one: a failed Apply is retried
// with it.
func TestReleaseLeftoversIsPartOfTheState(t *testing.T) {
	e := newTestEnv(t)
	e.link(t, lbConn("lb-1"), LBConn, 7)
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 1 })
	require.False(t, s.ReleaseLeftovers, "held until asked")
	e.dp.FailNext(1)
	e.p.ReleaseLeftovers()
	e.dp.waitState(t, func(s dataplaneState) bool { return s.ReleaseLeftovers })
	e.link(t, targetConn("t1"), TargetConn, 8)
	s = e.dp.waitState(t, func(s dataplaneState) bool { return len(s.Ports) == 2 })
	require.True(t, s.ReleaseLeftovers, "and it stays released")
}
