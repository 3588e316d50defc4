package connlink_test

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Lost, the heal client's data-plane fact: a connection's link is lost only
// once its announced link went away, and no longer when the link comes back.
func TestLost(t *testing.T) {
	links := &dataplanefake.Dataplane{}
	m := connlink.New(newRecorder(), links)
	alive := func(_ context.Context, conn *networkservice.Connection) bool {
		return !m.Lost(proxy.LBConn, conn.GetId())
	}
	conn := &networkservice.Connection{Id: "c1"}
	ctx := context.Background()

	require.True(t, alive(ctx, conn), "unknown connection")
	m.Expect(lbIface("c1", "nsm-1"))
	require.True(t, alive(ctx, conn), "link not seen yet")
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.True(t, alive(ctx, conn), "link present")
	require.False(t, m.Lost(proxy.TargetConn, "c1"), "another type's connection")

	m.HandleLinkEvent(links.DeleteLink(7))
	require.False(t, alive(ctx, conn), "link deleted in the kernel")
	require.True(t, m.Lost(proxy.LBConn, "c1"))

	m.HandleLinkEvent(links.SetLink(9, "nsm-1"))
	require.True(t, alive(ctx, conn), "link back under the same name")

	m.HandleLinkEvent(links.SetLink(9, "renamed"))
	require.False(t, alive(ctx, conn), "link renamed away")

	m.Forget(proxy.LBConn, "c1")
	require.True(t, alive(ctx, conn), "a forgotten connection is not known to be lost")
}
