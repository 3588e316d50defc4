package nexthopcheck

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// childEnv turns TestNetAdminChild into the child of
// TestProbesWithNetAdminOnly; its value is the peer to check.
const childEnv = "CAUSEWAY_NEXTHOPCHECK_CHILD"

// childUID is the child's user, the images' (not root).
const childUID = 10005

// A process that is not root and holds CAP_NET_ADMIN alone (the proxy in
// its pod) probes a peer on the bridge, bound to the bridge, given the
// namespace's ping_group_range. The child is this test binary, run through
// setpriv in the proxy's namespace.
func TestProbesWithNetAdminOnly(t *testing.T) {
	b := newBed(t)
	b.addPeer(t, 0, peer4(0), peer6(0))
	self, err := os.Executable()
	require.NoError(t, err)
	dir := t.TempDir()
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "nexthopcheck.test")
	data, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, data, 0o755))

	ctx, cancel := context.WithTimeout(context.Background(), 2*guard)
	defer cancel()
	uid := strconv.Itoa(childUID)
	cmd := exec.CommandContext(ctx, "ip", "netns", "exec", b.proxy.Name,
		"setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups",
		"--inh-caps=-all,+net_admin", "--ambient-caps=-all,+net_admin", "--bounding-set=-all,+net_admin",
		"--", bin, "-test.run=^TestNetAdminChild$", "-test.count=1", "-test.v")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s,%s,%d", childEnv, peer4(0), peer6(0), b.bridge))
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "the child:\n%s", out)
	require.Contains(t, string(out), "CapEff:\t0000000000001000", "the child holds CAP_NET_ADMIN alone:\n%s", out)
	require.Contains(t, string(out), "uid "+uid)
	require.Contains(t, string(out), "answered "+peer4(0).String())
	require.Contains(t, string(out), "answered "+peer6(0).String())
}

// TestNetAdminChild is the child of TestProbesWithNetAdminOnly, not a test
// of its own: it reports its capabilities and user, then checks the peers
// named in its environment until each has answered.
func TestNetAdminChild(t *testing.T) {
	spec := os.Getenv(childEnv)
	if spec == "" {
		t.Skip("the child of TestProbesWithNetAdminOnly")
	}
	status, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(status), "\n") {
		if strings.HasPrefix(line, "CapEff:") {
			fmt.Println(line)
		}
	}
	fmt.Printf("uid %d\n", os.Getuid())
	f := strings.Split(spec, ",")
	link, err := strconv.Atoi(f[2])
	require.NoError(t, err)
	peers := []Peer{{netip.MustParseAddr(f[0]), link}, {netip.MustParseAddr(f[1]), link}}
	c, err := New(Settings{})
	require.NoError(t, err)
	defer func() { require.NoError(t, c.Close()) }()
	require.NoError(t, c.Watch(peers))
	require.Eventually(t, func() bool {
		for _, s := range c.Statuses() {
			if s.State != Up || s.Answered < 3 {
				return false
			}
		}
		return true
	}, guard, 10*time.Millisecond)
	for _, s := range c.Statuses() {
		fmt.Printf("answered %s %d\n", s.Addr, s.Answered)
	}
}
