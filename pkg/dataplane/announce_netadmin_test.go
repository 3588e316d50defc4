package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// netAdminHelperEnv turns TestNetAdminOnlyHelper into the child of
// TestAnnouncementsWithNetAdminOnly.
const netAdminHelperEnv = "CAUSEWAY_DATAPLANE_NETADMIN_HELPER"

// netAdminUID is the child's user, the images' (not root).
const netAdminUID = 10005

var (
	helperPrefixes = []netip.Prefix{mp("192.0.2.1/24"), mp("fd00:cafe::1/64")}
	helperAddrs    = []netip.Addr{ma("192.0.2.1"), ma("fd00:cafe::1")}
)

// The Dataplane of a process that holds CAP_NET_ADMIN and nothing else, as
// a non-root user, corrects its neighbours' stale entries for the bridge's
// addresses (IPv4 and IPv6): when the addresses are set, and for the far
// end of a port that joins later. The child is this test binary run
// through setpriv in the proxy's namespace.
func TestAnnouncementsWithNetAdminOnly(t *testing.T) {
	testutil.RequireRoot(t)
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Fatal("setpriv is missing (Debian's util-linux)")
	}
	p := testutil.NewNetNS(t, "nap")
	n1 := testutil.NewNetNS(t, "nat1")
	n2 := testutil.NewNetNS(t, "nat2")
	vethPair(t, p, "t1p", n1, "eth0")
	vethPair(t, p, "t2p", n2, "eth0")
	for i, n := range []*testutil.NetNS{n1, n2} {
		n.MustExec(t, "ip", "addr", "add", fmt.Sprintf("192.0.2.%d/24", 51+i), "dev", "eth0")
		n.MustExec(t, "ip", "addr", "add", fmt.Sprintf("fd00:cafe::%d/64", 51+i), "dev", "eth0", "nodad")
		// Both targets knew the bridge's addresses at another MAC.
		poison(t, n, "eth0", helperAddrs...)
	}

	child := startNetAdminHelper(t, p)
	require.Equal(t, "1000", child.expect(t, "caps "), "the child's effective, permitted and bounding sets hold CAP_NET_ADMIN only")
	require.Equal(t, strconv.Itoa(netAdminUID), child.expect(t, "uid "))
	mac, err := net.ParseMAC(child.expect(t, "mac "))
	require.NoError(t, err)

	// The bridge's addresses are set with one port: its far end hears them.
	start := time.Now()
	child.send(t, "t1p")
	child.expect(t, "applied")
	waitCorrected(t, handle(t, n1), "eth0", mac, helperAddrs...)
	t.Logf("FIGURE: CAP_NET_ADMIN only: a neighbour's stale entries corrected %s after the Apply", time.Since(start).Round(time.Microsecond))

	// A second port joins: its far end hears them too.
	start = time.Now()
	child.send(t, "t1p t2p")
	child.expect(t, "applied")
	waitCorrected(t, handle(t, n2), "eth0", mac, helperAddrs...)
	t.Logf("FIGURE: CAP_NET_ADMIN only: the far end of a joining port corrected %s after the Apply (during the first Apply's burst: rounds are at least 100 ms apart)", time.Since(start).Round(time.Microsecond))

	// The child set the bridge's notify sysctls itself.
	require.Equal(t, "1", strings.TrimSpace(p.MustExec(t, "sysctl", "-n", "net.ipv4.conf."+DefaultBridgeName+".arp_notify")))
	require.Equal(t, "1", strings.TrimSpace(p.MustExec(t, "sysctl", "-n", "net.ipv6.conf."+DefaultBridgeName+".ndisc_notify")))
	child.stop(t)
}

// netAdminHelper is the running child: lines in, lines out.
type netAdminHelper struct {
	cmd   *exec.Cmd
	in    io.WriteCloser
	lines chan string
	done  chan struct{}
	out   strings.Builder // everything it printed, for failures
}

// startNetAdminHelper copies the test binary where the child's user can
// run it and starts it in ns as that user with CAP_NET_ADMIN alone.
func startNetAdminHelper(t *testing.T, ns *testutil.NetNS) *netAdminHelper {
	self, err := os.Executable()
	require.NoError(t, err)
	dir, err := os.MkdirTemp("", "dataplane-netadmin-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	bin := filepath.Join(dir, "dataplane.test")
	b, err := os.ReadFile(self)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(bin, b, 0o755))

	uid := strconv.Itoa(netAdminUID)
	cmd := exec.Command("ip", "netns", "exec", ns.Name,
		"setpriv", "--reuid="+uid, "--regid="+uid, "--clear-groups",
		"--inh-caps=-all,+net_admin", "--ambient-caps=-all,+net_admin", "--bounding-set=-all,+net_admin",
		"--", bin, "-test.run=^TestNetAdminOnlyHelper$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), netAdminHelperEnv+"=1")
	h := &netAdminHelper{cmd: cmd, lines: make(chan string, 16), done: make(chan struct{})}
	h.in, err = cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout
	require.NoError(t, cmd.Start())
	go func() {
		defer close(h.done)
		defer close(h.lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
	}()
	t.Cleanup(func() {
		_ = h.in.Close()
		_ = cmd.Process.Kill()
		for range h.lines {
		}
		<-h.done
		_ = cmd.Wait()
	})
	return h
}

func (h *netAdminHelper) send(t *testing.T, line string) {
	t.Helper()
	_, err := io.WriteString(h.in, line+"\n")
	require.NoError(t, err)
}

// expect reads lines until one starts with prefix and returns the rest.
func (h *netAdminHelper) expect(t *testing.T, prefix string) string {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case line, ok := <-h.lines:
			if !ok {
				t.Fatalf("the child exited before %q:\n%s", prefix, h.out.String())
			}
			h.out.WriteString(line + "\n")
			if rest, found := strings.CutPrefix(line, prefix); found {
				return rest
			}
			if strings.HasPrefix(line, "error ") {
				t.Fatalf("the child failed:\n%s", h.out.String())
			}
		case <-timeout:
			t.Fatalf("no %q from the child within 30 s:\n%s", prefix, h.out.String())
		}
	}
}

// stop closes the child's input and waits for its clean exit (its own
// goleak check included).
func (h *netAdminHelper) stop(t *testing.T) {
	t.Helper()
	require.NoError(t, h.in.Close())
	for line := range h.lines {
		h.out.WriteString(line + "\n")
	}
	<-h.done
	require.NoError(t, h.cmd.Wait(), "the child:\n%s", h.out.String())
}

// TestNetAdminOnlyHelper is the child of TestAnnouncementsWithNetAdminOnly,
// not a test of its own. It reports its capabilities and user, starts a
// Dataplane in its namespace and, for each line of port names it reads,
// applies the bridge's addresses with those ports.
func TestNetAdminOnlyHelper(t *testing.T) {
	if os.Getenv(netAdminHelperEnv) == "" {
		t.Skip("the child of TestAnnouncementsWithNetAdminOnly")
	}
	say := func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	fail := func(err error) {
		say("error %v", err)
		t.Fatal(err)
	}
	caps, err := ownCapabilities()
	if err != nil {
		fail(err)
	}
	say("caps %s", caps)
	say("uid %d", os.Getuid())
	dp, err := New(ctx, Options{AnnounceInterval: 100 * time.Millisecond})
	if err != nil {
		fail(err)
	}
	defer func() { _ = dp.Close() }()
	say("mac %s", dp.BridgeMAC())
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		s := State{BridgeAddrs: helperPrefixes}
		for _, name := range strings.Fields(sc.Text()) {
			ifi, err := net.InterfaceByName(name)
			if err != nil {
				fail(err)
			}
			s.Ports = append(s.Ports, Port{Index: ifi.Index})
		}
		if err := dp.Apply(s); err != nil {
			fail(err)
		}
		say("applied")
	}
}

// ownCapabilities returns the process's effective capability set, in hex as
// /proc shows it, after checking that the permitted and bounding sets are
// the same.
func ownCapabilities() (string, error) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "", err
	}
	sets := map[string]string{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.HasPrefix(k, "Cap") {
			sets[k] = strings.TrimLeft(strings.TrimSpace(v), "0")
		}
	}
	if sets["CapEff"] != sets["CapPrm"] || sets["CapEff"] != sets["CapBnd"] {
		return "", fmt.Errorf("capability sets differ: %v", sets)
	}
	return sets["CapEff"], nil
}
