package connlink_test

import (
	"context"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// kernelDataplane starts the dataplane (the namespace's one table of
// links) in ns; it is closed at the end of the test.
func kernelDataplane(t *testing.T, ns *testutil.NetNS) *dataplane.Dataplane {
	t.Helper()
	dp, err := dataplane.New(context.Background(), dataplane.Options{NetNS: ns.Handle, AnnounceCount: -1,
		Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, dp.Close()) })
	return dp
}

// runMatcher runs m on the link events of dp until the end of the test.
func runMatcher(t *testing.T, m *connlink.Matcher, dp *dataplane.Dataplane) {
	t.Helper()
	events, unsubscribe := dp.Subscribe()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		defer unsubscribe()
		done <- m.Run(ctx, events)
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
}

// TestKernelLinkMovedInAndRenamed plays the forwarder against a real
// kernel: it creates a veth pair in its own namespace, moves one end into
// the proxy's namespace, renames it to the name NSM gave the connection and
// finally deletes the pair. The matcher reads the dataplane's link table.
func TestKernelLinkMovedInAndRenamed(t *testing.T) {
	proxyNS := testutil.NewNetNS(t, "imon-proxy")
	fwdNS := testutil.NewNetNS(t, "imon-fwd")
	dp := kernelDataplane(t, proxyNS)
	r := newRecorder()
	m := connlink.New(r, dp)
	runMatcher(t, m, dp)

	m.Expect(proxy.Interface{Name: "nsm-lb0", Type: proxy.LBConn, ConnKey: "c1"})

	fwd, err := netlink.NewHandleAt(fwdNS.Handle)
	require.NoError(t, err)
	defer fwd.Close()
	prx, err := netlink.NewHandleAt(proxyNS.Handle)
	require.NoError(t, err)
	defer prx.Close()

	require.NoError(t, fwd.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "fwd-a"}, PeerName: "tmp-b"}))
	peer, err := fwd.LinkByName("tmp-b")
	require.NoError(t, err)
	require.NoError(t, fwd.LinkSetNsFd(peer, int(proxyNS.Handle)))
	moved, err := prx.LinkByName("tmp-b")
	require.NoError(t, err)
	require.NoError(t, prx.LinkSetName(moved, "nsm-lb0"))
	require.NoError(t, prx.LinkSetUp(moved))

	index := proxyNS.LinkIndex(t, "nsm-lb0")
	want := []string{"created nsm-lb0 " + strconv.Itoa(index) + " c1"}
	require.Eventually(t, func() bool {
		ev := r.Events()
		return len(ev) == 1 && ev[0] == want[0]
	}, 20*time.Second, 10*time.Millisecond, "the renamed link is announced once with its index")

	// Deleting the forwarder's end takes the proxy's end with it.
	fwdEnd, err := fwd.LinkByName("fwd-a")
	require.NoError(t, err)
	require.NoError(t, fwd.LinkDel(fwdEnd))
	want = append(want, "deleted nsm-lb0 "+strconv.Itoa(index)+" c1")
	require.Eventually(t, func() bool {
		ev := r.Events()
		return len(ev) == 2 && ev[1] == want[1]
	}, 20*time.Second, 10*time.Millisecond)
}
