package interfacemonitor_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// The heal client's data-plane check: a connection is dead only once its
// announced link went away, and alive again when the link comes back.
func TestLivenessCheck(t *testing.T) {
	m := interfacemonitor.New(&recorder{})
	alive := m.LivenessCheck(proxy.LBConn)
	conn := &networkservice.Connection{Id: "c1"}
	ctx := context.Background()

	require.True(t, alive(ctx, conn), "unknown connection")
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	require.True(t, alive(ctx, conn), "link not seen yet")
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.True(t, alive(ctx, conn), "link present")
	require.True(t, m.LivenessCheck(proxy.TargetConn)(ctx, conn), "another type's connection")

	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Deleted: true})
	require.False(t, alive(ctx, conn), "link deleted in the kernel")
	require.True(t, m.Lost(proxy.LBConn, "c1"))

	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 9, Name: "nsm-1"})
	require.True(t, alive(ctx, conn), "link back under the same name")

	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 9, Name: "renamed"})
	require.False(t, alive(ctx, conn), "link renamed away")

	m.Forget(proxy.LBConn, "c1")
	require.True(t, alive(ctx, conn), "a forgotten connection is not known to be lost")
}
