package topo_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// TestRouterSysctlsNewLinksHaveUsableLinkLocal checks that a link made in
// a router namespace after its sysctls (as NSM's forwarder makes an LB's
// veth) has its IPv6 link-local address usable at once, not tentative for
// the second or more of duplicate address detection, during which the
// namespace cannot resolve its IPv6 neighbours.
func TestRouterSysctlsNewLinksHaveUsableLinkLocal(t *testing.T) {
	a := testutil.NewNetNS(t, "dad-a")
	b := testutil.NewNetNS(t, "dad-b")
	require.NoError(t, topo.ApplySysctls(a.Path(), topo.RouterSysctls))
	require.NoError(t, topo.ApplySysctls(b.Path(), topo.RouterSysctls))

	a.MustExec(t, "ip", "link", "add", "v-a", "type", "veth", "peer", "name", "v-b", "netns", b.Name)
	a.MustExec(t, "ip", "link", "set", "v-a", "up")
	b.MustExec(t, "ip", "link", "set", "v-b", "up")
	for _, end := range []struct {
		ns  *testutil.NetNS
		dev string
	}{{a, "v-a"}, {b, "v-b"}} {
		var out string
		// Without DAD the address is there as soon as the link is up; with
		// it, it would stay tentative for at least a second.
		usable := assert.Eventually(t, func() bool {
			out = end.ns.MustExec(t, "ip", "-6", "addr", "show", "dev", end.dev, "scope", "link")
			return strings.Contains(out, "inet6 fe80::") && !strings.Contains(out, "tentative")
		}, 500*time.Millisecond, 20*time.Millisecond)
		require.True(t, usable, "%s: a usable link-local address at once: %s", end.dev, out)
	}
}
