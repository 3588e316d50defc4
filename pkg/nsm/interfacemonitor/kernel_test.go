package interfacemonitor_test

import (
	"context"
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/nsmsandbox"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
	"github.com/causeway-net/causeway/pkg/proxy"
)

func ifindex(t *testing.T, ns *testutil.NetNS, name string) int {
	t.Helper()
	out := ns.MustExec(t, "cat", "/sys/class/net/"+name+"/ifindex")
	i, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	return i
}

// TestKernelLinkMovedInAndRenamed plays the forwarder against a real
// kernel: it creates a veth pair in its own namespace, moves one end into
// the proxy's namespace, renames it to the name NSM gave the connection and
// finally deletes the pair.
func TestKernelLinkMovedInAndRenamed(t *testing.T) {
	proxyNS := testutil.NewNetNS(t, "imon-proxy")
	fwdNS := testutil.NewNetNS(t, "imon-fwd")
	r := &recorder{}
	m := interfacemonitor.New(r)
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- m.Run(ctx, nsmsandbox.LinkEvents(t, proxyNS)) }()
	t.Cleanup(func() {
		cancel()
		<-runDone
	})

	m.Expect(proxy.Interface{
		Name: "nsm-lb0", Type: proxy.LBConn, ConnID: "c1",
		LocalAddrs:    []netip.Prefix{netip.MustParsePrefix("172.16.1.1/24")},
		NeighborAddrs: []netip.Addr{netip.MustParseAddr("172.16.1.2")},
	})

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

	index := ifindex(t, proxyNS, "nsm-lb0")
	want := []string{"created nsm-lb0 " + strconv.Itoa(index) + " c1"}
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.events) == 1 && r.events[0] == want[0]
	}, 20*time.Second, 10*time.Millisecond, "the renamed link is announced once with its index")

	// Deleting the forwarder's end takes the proxy's end with it.
	fwdEnd, err := fwd.LinkByName("fwd-a")
	require.NoError(t, err)
	require.NoError(t, fwd.LinkDel(fwdEnd))
	want = append(want, "deleted nsm-lb0 "+strconv.Itoa(index)+" c1")
	require.Eventually(t, func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.events) == 2 && r.events[1] == want[1]
	}, 20*time.Second, 10*time.Millisecond)
}
