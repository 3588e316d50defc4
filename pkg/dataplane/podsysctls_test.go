package dataplane

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPodSysctlsCoverTheBridgeThroughDefaults(t *testing.T) {
	got := PodSysctls(0)
	require.Contains(t, got, "net.ipv4.conf.all.forwarding=1")
	require.Contains(t, got, "net.ipv6.conf.all.accept_dad=0")
	require.Contains(t, got, "net.ipv4.conf.default.promote_secondaries=1")
	// The kernel's announcements of a bridge created after them.
	require.Contains(t, got, "net.ipv4.conf.default.arp_notify=1")
	require.Contains(t, got, "net.ipv6.conf.default.ndisc_notify=1")
	seen := map[string]bool{}
	for _, kv := range got {
		require.False(t, seen[kv], "%s listed twice", kv)
		seen[kv] = true
	}
	require.Len(t, got, len(globalSysctls())+3, "the bridge keys add promote_secondaries, arp_notify and ndisc_notify to the defaults")
	require.Equal(t, got, PodSysctls(SysctlsIPv4|SysctlsIPv6))
}

func TestPodSysctlsOfOneFamily(t *testing.T) {
	v4, v6 := PodSysctls(SysctlsIPv4), PodSysctls(SysctlsIPv6)
	for _, kv := range v4 {
		require.True(t, strings.HasPrefix(kv, "net.ipv4."), kv)
	}
	for _, kv := range v6 {
		require.True(t, strings.HasPrefix(kv, "net.ipv6."), kv)
	}
	require.Contains(t, v4, "net.ipv4.conf.all.rp_filter=0")
	require.Contains(t, v6, "net.ipv6.conf.default.accept_dad=0")
	require.Len(t, append(v4, v6...), len(PodSysctls(0)))
}
