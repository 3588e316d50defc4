package proxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestVIPPolicyRefusesCaptureOfClusterNetworks: a configuration that would
// capture the cluster's own traffic (two /1s covering everything, the
// service network, a pod's address, the cloud metadata address, loopback)
// is refused entry by entry, each error naming the VIP and what it
// overlaps or the bound it exceeds; the valid VIP beside them is served.
func TestVIPPolicyRefusesCaptureOfClusterNetworks(t *testing.T) {
	e := newTestEnv(t, func(c *Config) {
		c.VIPs.Forbidden = prefixes("10.96.0.0/12", "10.244.0.0/16", "192.168.10.0/24", "fd10::/108")
	})
	refused := map[string]string{
		"0.0.0.0/1":          "wider than /24",
		"128.0.0.0/1":        "", // also the node subnet's: refused either way
		"2000::/3":           "wider than /120",
		"10.96.0.10/32":      "overlaps the cluster's or the node's network 10.96.0.0/12",
		"10.244.3.7/32":      "overlaps the cluster's or the node's network 10.244.0.0/16",
		"192.168.10.5/32":    "overlaps the cluster's or the node's network 192.168.10.0/24",
		"fd10::1/128":        "overlaps the cluster's or the node's network fd10::/108",
		"169.254.169.254/32": "overlaps link-local (cloud metadata) 169.254.0.0/16",
		"127.0.0.1/32":       "overlaps loopback 127.0.0.0/8",
		"::1/128":            "overlaps loopback ::1/128",
		"224.0.0.5/32":       "overlaps multicast 224.0.0.0/4",
	}
	list := prefixes("20.0.0.1/32", "2000::1/128", "40.0.0.0/24")
	for v := range refused {
		list = append(list, netip.MustParsePrefix(v))
	}
	err := e.p.SetVIPs(list)
	require.Error(t, err)
	for v, why := range refused {
		require.ErrorContains(t, err, "VIP "+v+": "+why)
	}
	s := e.dp.waitState(t, func(s dataplaneState) bool { return len(s.VIPs) == 3 })
	require.Equal(t, "[20.0.0.1/32 40.0.0.0/24 2000::1/128]", sprint(s.VIPs))
	require.Equal(t, uint64(len(refused)), e.p.Stats().VIPsRejected)
}

// TestVIPPolicyBoundsConfigurable: the width bound is a setting.
func TestVIPPolicyBoundsConfigurable(t *testing.T) {
	p := VIPPolicy{MinPrefixLen4: 16, MinPrefixLen6: 64}.withDefaults()
	require.NoError(t, p.check(netip.MustParsePrefix("40.1.0.0/16")))
	require.NoError(t, p.check(netip.MustParsePrefix("2001:db8::/64")))
	require.ErrorContains(t, p.check(netip.MustParsePrefix("40.0.0.0/15")), "VIP 40.0.0.0/15: wider than /16")
}
