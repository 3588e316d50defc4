package ipamd

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadDefaultsMatchMeridio(t *testing.T) {
	c, err := Load()
	require.NoError(t, err)
	assert.Equal(t, 7777, c.Port)
	assert.Equal(t, "/run/ipam/data/registry.db", c.Datasource)
	assert.Equal(t, "default", c.TrenchName)
	assert.Equal(t, "nsp-service:7778", c.NSPService)
	assert.Equal(t, "dualstack", c.IPFamily)
	assert.Equal(t, "DEBUG", c.LogLevel)
	assert.Equal(t, 2*time.Hour, c.GarbageCollectionInterval)
	assert.Equal(t, 40*time.Minute, c.GarbageCollectionThreshold)
	assert.Equal(t, 2112, c.MetricsPort)

	ec, err := c.engineConfig()
	require.NoError(t, err)
	require.NotNil(t, ec.IPv4)
	require.NotNil(t, ec.IPv6)
	assert.Equal(t, netip.MustParsePrefix("169.255.0.0/16"), ec.IPv4.Pool)
	assert.Equal(t, [2]int{20, 24}, [2]int{ec.IPv4.ConduitLength, ec.IPv4.NodeLength})
	assert.Equal(t, netip.MustParsePrefix("fd00::/48"), ec.IPv6.Pool)
	assert.Equal(t, [2]int{56, 64}, [2]int{ec.IPv6.ConduitLength, ec.IPv6.NodeLength})
	assert.Equal(t, "default", ec.Trench)
	assert.Equal(t, 2*time.Hour, ec.GCInterval)
}

func TestLoadOneFamily(t *testing.T) {
	t.Setenv("IPAM_IP_FAMILY", "IPv6")
	t.Setenv("IPAM_PREFIX_IPV4", "not even a prefix") // not used for ipv6 only
	t.Setenv("IPAM_GARBAGE_COLLECTION_ENABLED", "false")
	c, err := Load()
	require.NoError(t, err)
	ec, err := c.engineConfig()
	require.NoError(t, err)
	assert.Nil(t, ec.IPv4)
	require.NotNil(t, ec.IPv6)
	assert.Zero(t, ec.GCInterval, "collection disabled")
}

// TestLoadNamesEveryProblem: all problems are reported at once, one a line,
// each naming its variable.
func TestLoadNamesEveryProblem(t *testing.T) {
	bad := map[string]string{
		"IPAM_PREFIX_IPV4":                  "fd00::/48",
		"IPAM_NODE_PREFIX_LENGTH_IPV6":      "40",
		"IPAM_LOG_LEVEL":                    "loud",
		"IPAM_TRENCH_NAME":                  "a b",
		"IPAM_METRICS_PORT":                 "70000",
		"IPAM_GARBAGE_COLLECTION_THRESHOLD": "1m",
	}
	for k, v := range bad {
		t.Setenv(k, v)
	}
	_, err := Load()
	require.Error(t, err)
	msg := err.Error()
	assert.True(t, strings.HasPrefix(msg, "invalid configuration:\n"), msg)
	assert.Len(t, strings.Split(msg, "\n"), len(bad)+1, msg)
	for k := range bad {
		assert.Contains(t, msg, k)
	}
}

func TestLoadUnparsableValue(t *testing.T) {
	t.Setenv("IPAM_PORT", "port")
	t.Setenv("IPAM_METRICS_PORT", "-")
	_, err := Load()
	require.Error(t, err)
	assert.True(t, strings.HasPrefix(err.Error(), "cannot read the IPAM_* environment:\n"), err.Error())
	assert.Contains(t, err.Error(), `IPAM_PORT="port": not an integer`)
	assert.Contains(t, err.Error(), `IPAM_METRICS_PORT="-": not an integer`, "every value that does not parse is named")
}

func TestValidateWithoutLoad(t *testing.T) {
	c := &Config{}
	err := c.Validate()
	require.Error(t, err)
	for _, v := range []string{"IPAM_IP_FAMILY", "IPAM_DATASOURCE", "IPAM_LEASE_FLUSH_INTERVAL", "IPAM_GRACE_PERIOD"} {
		assert.Contains(t, err.Error(), v)
	}
}

// TestLogValueNamesEachSettingOnce: the "starting" line's config object has
// no key twice (it had listenAddress and metricsPort twice: JSON readers
// keep one of them silently).
func TestLogValueNamesEachSettingOnce(t *testing.T) {
	c, err := Load()
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, a := range c.LogValue().Group() {
		assert.False(t, seen[a.Key], "key %q twice", a.Key)
		seen[a.Key] = true
	}
	for _, key := range []string{"listenAddress", "metricsPort", "healthPort", "gracePeriod", "snapshotDir"} {
		assert.True(t, seen[key], "key %q", key)
	}
}

// A pool that is no prefix is named with an example, not a Go function.
func TestLoadNamesABadPoolPlainly(t *testing.T) {
	t.Setenv("IPAM_PREFIX_IPV4", "10.0.0.0/33")
	_, err := Load()
	require.ErrorContains(t, err, `IPAM_PREFIX_IPV4: "10.0.0.0/33" is not a prefix in CIDR notation (such as 172.16.0.0/16)`)
	assert.NotContains(t, err.Error(), "netip")
}

// The store is bbolt unless asked; the Kubernetes store's settings are
// checked only when it is chosen, each problem naming its variable.
func TestLoadStore(t *testing.T) {
	c, err := Load()
	require.NoError(t, err)
	assert.Equal(t, StoreBolt, c.Store)
	assert.Equal(t, "causeway-ipam-default", c.leaseName())

	t.Setenv("IPAM_STORE", "etcd")
	_, err = Load()
	require.ErrorContains(t, err, `IPAM_STORE: "etcd" is not bolt or kubernetes`)

	t.Setenv("IPAM_STORE", "kubernetes")
	t.Setenv("IPAM_DATASOURCE", "") // not used by the Kubernetes store
	t.Setenv("IPAM_TRENCH_NAME", "Blue_Trench")
	t.Setenv("IPAM_LEADER_LEASE_DURATION", "1s")
	t.Setenv("IPAM_LEADER_ADDRESS", "ipam-0.peers:7777")
	_, err = Load()
	require.Error(t, err)
	assert.Contains(t, err.Error(), "IPAM_LEADER_LEASE_DURATION: 1s is below 3s")
	assert.Contains(t, err.Error(), `IPAM_LEADER_LEASE_NAME: "causeway-ipam-blue_trench" is not a Kubernetes object name`)
	assert.Contains(t, err.Error(), `IPAM_LEADER_ADDRESS: "ipam-0.peers:7777" does not contain {identity}`)
	assert.NotContains(t, err.Error(), "IPAM_DATASOURCE")

	t.Setenv("IPAM_LEADER_LEASE_DURATION", "15s")
	t.Setenv("IPAM_LEADER_LEASE_NAME", "ipam-blue")
	t.Setenv("IPAM_LEADER_ADDRESS", "{identity}.peers:7777")
	c, err = Load()
	require.NoError(t, err)
	assert.Equal(t, "ipam-blue", c.leaseName())
}

func TestReplicaNames(t *testing.T) {
	c := &Config{KubeNamespace: "ns1", Identity: "ipam-0"}
	ns, id, err := c.replicaNames()
	require.NoError(t, err)
	assert.Equal(t, [2]string{"ns1", "ipam-0"}, [2]string{ns, id})
	c.Identity = ""
	_, id, err = c.replicaNames()
	require.NoError(t, err)
	host, _ := os.Hostname()
	assert.Equal(t, host, id, "the pod's name is its host name")
}
