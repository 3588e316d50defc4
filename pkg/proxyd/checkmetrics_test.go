package proxyd

import (
	"net/netip"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// One series per peer and kind; an unchecked peer reads -1.
func TestCheckMetricsPerPeer(t *testing.T) {
	c := offChecker(t)
	require.NoError(t, c.Watch([]nexthopcheck.Peer{{Addr: netip.MustParseAddr("172.16.0.2")}, {Addr: netip.MustParseAddr("fd00::2")}}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCheckMetrics(c, "nexthop", "out of its route"), newCheckMetrics(c, "target", "reported only"))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]int{}
	for _, f := range families {
		got[f.GetName()] = len(f.GetMetric())
		if f.GetName() == "causeway_proxy_nexthop_up" {
			for _, m := range f.GetMetric() {
				require.Equal(t, -1.0, m.GetGauge().GetValue())
				require.Equal(t, "nexthop", m.GetLabel()[0].GetName())
			}
		}
	}
	for _, kind := range []string{"nexthop", "target"} {
		for _, name := range []string{"up", "last_change_timestamp_seconds", "probes_sent_total", "probes_lost_total", "downs_total"} {
			require.Equal(t, 2, got["causeway_proxy_"+kind+"_"+name], "%s %s", kind, name)
		}
		require.Equal(t, 1, got["causeway_proxy_"+kind+"_check_dropped_total"])
	}
}
