package helmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// proxyEnv renders values and returns the proxy's effective environment
// of every conduit.
func proxyEnv(t *testing.T, values string) []map[string]string {
	t.Helper()
	m := render(t, values)
	_, bins := loadReference(t)
	var out []map[string]string
	for _, ds := range m.daemonSets {
		out = append(out, env(container(t, ds.Spec.Template.Spec, "proxy"), bins["proxy"]))
	}
	require.NotEmpty(t, out)
	return out
}

// TestVIPAndEndpointBounds: the proxies refuse VIPs over the cluster's
// networks and the pools, bound their width, and keep endpoints inside the
// pools; the port filter is on unless turned off.
func TestVIPAndEndpointBounds(t *testing.T) {
	for _, e := range proxyEnv(t, "") {
		require.Equal(t, "172.16.0.0/16,fd00::/48", e["NSM_CLUSTER_PREFIXES"])
		require.Equal(t, "172.16.0.0/16,fd00::/48", e["NSM_ENDPOINT_PREFIXES"])
		require.Equal(t, "24", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV4"])
		require.Equal(t, "120", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV6"])
		require.Equal(t, "false", e["NSM_PORT_FILTER_OFF"])
	}
	values := "clusterNetworks: [10.96.0.0/12, 10.244.0.0/16]\nproxy: {vipMinPrefixLength: {ipv4: 28, ipv6: 112}, portFilter: false}\n"
	for _, e := range proxyEnv(t, values) {
		require.Equal(t, "10.96.0.0/12,10.244.0.0/16,172.16.0.0/16,fd00::/48", e["NSM_CLUSTER_PREFIXES"])
		require.Equal(t, "28", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV4"])
		require.Equal(t, "112", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV6"])
		require.Equal(t, "true", e["NSM_PORT_FILTER_OFF"])
	}
	_, err := tryRender("clusterNetworks: [not-a-prefix]\n")
	require.ErrorContains(t, err, "clusterNetworks")
}

// TestLimitsRender: the limits reach the proxies and the IPAM, and the
// schema refuses a limit that is not positive.
func TestLimitsRender(t *testing.T) {
	values := "services: {enabled: true, source: kubernetes, limits: {services: 7, connectionsPerClient: 9}}\n" +
		"proxy: {limits: {connectionsPerClient: 5}}\nipam: {limits: {conduits: 3, addressesPerNode: 11}}\n"
	for _, e := range proxyEnv(t, values) {
		require.Equal(t, "5", e["NSM_MAX_CONNECTIONS_PER_CLIENT"])
		require.Equal(t, "7", e["NSM_SERVICES_MAX"])
		require.Equal(t, "9", e["NSM_SERVICE_MAX_CONNECTIONS_PER_CLIENT"])
	}
	m := render(t, values)
	_, bins := loadReference(t)
	require.Len(t, m.statefulSets, 1)
	e := env(container(t, m.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
	require.Equal(t, "3", e["IPAM_MAX_CONDUITS"])
	require.Equal(t, "11", e["IPAM_MAX_CHILDREN_PER_NODE"])
	_, err := tryRender("proxy: {limits: {connectionsPerClient: 0}}\n")
	require.ErrorContains(t, err, "connectionsPerClient")
}
