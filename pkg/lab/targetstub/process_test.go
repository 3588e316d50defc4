package targetstub_test

import (
	"net/netip"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labtest"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// TestTargetStubAsProcess runs the target stub as its own process inside its
// namespace (`ip netns exec`), as the lab does: its namespace travels to the
// forwarder by file descriptor and its echo service binds there.
func TestTargetStubAsProcess(t *testing.T) {
	bed, nse := newFakeProxyBed(t, "tgp", fakeProxy{})
	ctx, cp, tgtNS, prxNS := bed.Ctx, bed.CP, bed.Stub, bed.Proxy
	pubDir := filepath.Join(bed.Dir, "targets")

	child := labtest.StartChild(t, tgtNS, targetstub.Config{
		Name: "target-p", NSMgrURL: cp.NSMgrURL, Service: "proxy.c.t.ns", VIPs: []netip.Addr{netip.MustParseAddr("20.0.0.1")},
		Port: 5000, PublishDir: pubDir,
	})

	require.Eventually(t, func() bool {
		pubs, err := targetaddrs.Read(pubDir)
		return err == nil && len(pubs["target-p"]) == 2
	}, 30*time.Second, 100*time.Millisecond, "the target process publishes its addresses")

	prxNS.MustExec(t, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	prxNS.MustExec(t, "ip", "route", "replace", "20.0.0.1/32", "via", "172.16.1.5")
	require.Eventually(t, func() bool {
		name, err := traffic.Ask(ctx, prxNS.Path(), "tcp", netip.MustParseAddr("10.99.0.1"), netip.MustParseAddrPort("20.0.0.1:5000"), labtest.AskTimeout)
		return err == nil && name == "target-p"
	}, 20*time.Second, 200*time.Millisecond, "echo from the target process")

	// SIGTERM: the target leaves (withdraws and closes its connection).
	require.NoError(t, child.Signal(syscall.SIGTERM))
	require.NoError(t, child.Wait(t))
	pubs, err := targetaddrs.Read(pubDir)
	require.NoError(t, err)
	require.Empty(t, pubs)
	require.Eventually(t, func() bool {
		_, err := tgtNS.Exec("ip", "link", "show", targetstub.DefaultInterfaceName)
		return err != nil
	}, 20*time.Second, 100*time.Millisecond, "the connection is closed")

	nse.Stop()
	cp.Stop()
}
