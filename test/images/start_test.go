package images

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// startedLine is what the proxy logs once its dataplane (bridge, table) is
// up, right before it asks the IPAM for addresses.
const startedLine = "allocating bridge addresses"

// checkProxyStarts runs the proxy of the image as a pod would: in a network
// and mount namespace of its own, from the image's root file system mounted
// read-only, with /proc (its /proc/sys read-only and preset with
// dataplane.PodSysctls of a dual-stack proxy, as the chart's init container does) and a tmpfs at
// /tmp, as the image's user with no capability but the binary's own. Its
// dataplane must come up (bridge created), and `proxy -probe startup` run
// the same way must answer.
func checkProxyStarts(t *testing.T, rootfs string, uid, gid int) {
	for _, dir := range []string{"proc", "tmp"} {
		require.NoError(t, os.MkdirAll(filepath.Join(rootfs, dir), 0o755))
	}
	user := fmt.Sprintf("--userspec=%d:%d", uid, gid)
	script := strings.Join([]string{
		"set -e",
		`mount --bind "$R" "$R"`, `mount -o remount,bind,ro "$R"`,
		`mount -t proc proc "$R/proc"`, `mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"`,
		"ip link set lo up",
		`for kv in $SYSCTLS; do sysctl -qw "$kv"; done`,
		`sysctl -qw "net.ipv4.ping_group_range=0 2147483647"`, // as the chart does, on its own line
		`mount --bind "$R/proc/sys" "$R/proc/sys"`, `mount -o remount,bind,ro "$R/proc/sys"`,
		"echo pid $$",
		`exec chroot ` + user + ` "$R" /usr/local/bin/proxy`,
	}, "\n")
	cmd := exec.Command("unshare", "--net", "--mount", "--fork", "--kill-child", "--", "bash", "-c", script)
	cmd.Env = []string{
		"PATH=" + os.Getenv("PATH"), "R=" + rootfs, "SYSCTLS=" + strings.Join(dataplane.PodSysctls(0), " "),
		"NSM_INSECURE=true", "NSM_HOST=node-a", "NSM_LOG_LEVEL=DEBUG", "NSM_METRICS_ADDRESS=",
		// Nobody answers: the proxy waits there, its dataplane up.
		"NSM_IPAM_SERVICE=127.0.0.1:9", "NSM_NSP_SERVICE=127.0.0.1:9",
	}
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	cmd.Stderr = cmd.Stdout // one stream: the script's errors and the proxy's log
	require.NoError(t, cmd.Start())
	lines := make(chan string)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var pid int
	t.Cleanup(func() {
		// The proxy is killed by its pid: --kill-child's parent-death
		// signal does not survive the exec of a binary with capabilities.
		if pid != 0 {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		_ = cmd.Process.Kill()
		for range lines {
		}
		<-done
		_ = cmd.Wait()
	})

	start := time.Now()
	log := waitStarted(t, lines, &pid)
	t.Logf("FIGURE: proxy from the image up to its IPAM request in %s", time.Since(start).Round(time.Millisecond))
	require.NotContains(t, log, "operation not permitted")

	in := func(args ...string) *exec.Cmd {
		return exec.Command("nsenter", append([]string{"--target", strconv.Itoa(pid), "--mount", "--net"}, args...)...)
	}
	out, err := in("ip", "link", "show", "bridge0").CombinedOutput()
	require.NoError(t, err, "bridge0 in the proxy's namespace: %s", out)
	// The bridge inherited the notify sysctls of the kernel's
	// announcements from the defaults the init container set.
	out, err = in("sysctl", "-n", "net.ipv4.conf.bridge0.arp_notify", "net.ipv6.conf.bridge0.ndisc_notify").CombinedOutput()
	require.NoError(t, err, "bridge0's notify sysctls: %s", out)
	require.Equal(t, "1\n1", strings.TrimSpace(string(out)), "bridge0's arp_notify and ndisc_notify")
	out, err = in("chroot", user, rootfs, "/usr/local/bin/proxy", "-probe", "startup").CombinedOutput()
	require.NoError(t, err, "proxy -probe startup: %s", out)
}

// waitStarted reads the output until the proxy reports its dataplane up and
// returns what it logged until then. It sets *pid to the proxy's pid as soon
// as the script prints it.
func waitStarted(t *testing.T, lines <-chan string, pid *int) string {
	t.Helper()
	var log strings.Builder
	timeout := time.After(time.Minute)
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("the proxy exited:\n%s", log.String())
			}
			log.WriteString(line + "\n")
			if p, found := strings.CutPrefix(line, "pid "); found {
				*pid, _ = strconv.Atoi(p)
			}
			if strings.Contains(line, startedLine) {
				require.NotZero(t, *pid, "no pid line before the proxy's log")
				return log.String()
			}
		case <-timeout:
			t.Fatalf("the proxy did not log %q within a minute:\n%s", startedLine, log.String())
		}
	}
}
