package dataplane

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestPodSysctlsCoverTheBridgeThroughDefaults(t *testing.T) {
	got := PodSysctls()
	require.Contains(t, got, "net.ipv4.conf.all.forwarding=1")
	require.Contains(t, got, "net.ipv6.conf.all.accept_dad=0")
	require.Contains(t, got, "net.ipv4.conf.default.promote_secondaries=1")
	seen := map[string]bool{}
	for _, kv := range got {
		require.False(t, seen[kv], "%s listed twice", kv)
		seen[kv] = true
	}
	require.Len(t, got, len(globalSysctls())+1, "the bridge keys add only promote_secondaries to the defaults")
}
