package targetstub_test

import (
	"context"
	"encoding/json"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/nsmcp"
	"github.com/causeway-net/causeway/pkg/lab/pubdir"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
)

// TestTargetStubAsProcess runs the target stub as its own process inside its
// namespace (`ip netns exec`), as the lab does: its namespace travels to the
// forwarder by file descriptor and its echo service binds there.
func TestTargetStubAsProcess(t *testing.T) {
	tgtNS := testutil.NewNetNS(t, "tgp")
	prxNS := testutil.NewNetNS(t, "prx")
	dir := t.TempDir()
	pubDir := filepath.Join(dir, "targets")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cp, err := nsmcp.Start(ctx, nsmcp.Config{Dir: dir})
	require.NoError(t, err)
	defer cp.Stop()
	nse, err := nsmcp.StartEndpoint(ctx, nsmcp.EndpointConfig{
		Name: "fake-proxy", Service: "proxy.c.t.ns", NSMgrURL: cp.NSMgrURL,
		SocketPath: filepath.Join(dir, "proxy.sock"), NetNSPath: prxNS.Path(),
		Elements: []networkservice.NetworkServiceServer{fakeProxy{}},
	})
	require.NoError(t, err)
	defer nse.Stop()

	raw, err := json.Marshal(childConfig{NSMgrURL: cp.NSMgrURL.String(), Config: targetstub.Config{
		Name: "target-p", Service: "proxy.c.t.ns", VIPs: []netip.Addr{netip.MustParseAddr("20.0.0.1")},
		Port: 5000, PublishDir: pubDir,
	}})
	require.NoError(t, err)
	cmd := exec.Command("ip", "netns", "exec", tgtNS.Name, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(raw))
	cmd.Stderr = os.Stderr
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})

	require.Eventually(t, func() bool {
		pubs, err := pubdir.Read(pubDir)
		return err == nil && len(pubs["target-p"]) == 2
	}, 30*time.Second, 100*time.Millisecond, "the target process publishes its addresses")

	prxNS.MustExec(t, "ip", "addr", "add", "10.99.0.1/32", "dev", "lo")
	prxNS.MustExec(t, "ip", "route", "replace", "20.0.0.1/32", "via", "172.16.1.5")
	require.Eventually(t, func() bool {
		name, err := askTCP(prxNS.Path(), netip.MustParseAddr("10.99.0.1"), "20.0.0.1:5000")
		return err == nil && name == "target-p"
	}, 20*time.Second, 200*time.Millisecond, "echo from the target process")

	// SIGTERM: the target leaves (withdraws and closes its connection).
	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	require.NoError(t, <-exited)
	exited <- nil
	pubs, err := pubdir.Read(pubDir)
	require.NoError(t, err)
	require.Empty(t, pubs)
	require.Eventually(t, func() bool {
		_, err := tgtNS.Exec("ip", "link", "show", targetstub.DefaultInterfaceName)
		return err != nil
	}, 20*time.Second, 100*time.Millisecond, "the connection is closed")

	nse.Stop()
	cp.Stop()
}
