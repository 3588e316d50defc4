package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/targetstub"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// kernelWatch records what `ip monitor` reports in a namespace: links,
// addresses, routes and rules, one line per change.
type kernelWatch struct {
	cmd  *exec.Cmd
	done chan struct{}

	mu    sync.Mutex
	lines []string
}

// watchKernel starts `ip -o monitor` in the namespace at path; the test's
// cleanup stops it.
func watchKernel(t *testing.T, path string) *kernelWatch {
	t.Helper()
	w := &kernelWatch{done: make(chan struct{})}
	w.cmd = exec.Command("nsenter", "--net="+path, "ip", "-o", "monitor", "link", "address", "route", "rule")
	out, err := w.cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, w.cmd.Start())
	go func() {
		defer close(w.done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			w.mu.Lock()
			w.lines = append(w.lines, sc.Text())
			w.mu.Unlock()
		}
	}()
	t.Cleanup(w.stop)
	return w
}

func (w *kernelWatch) stop() {
	if w.cmd.Process != nil {
		_ = w.cmd.Process.Kill()
		<-w.done
		_ = w.cmd.Wait()
		w.cmd.Process = nil
	}
}

// take returns the lines recorded since the last take.
func (w *kernelWatch) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := w.lines
	w.lines = nil
	return out
}

// removals are the lines of a link, address, route or rule deleted (the
// kernel's "Deleted" notices); neighbour and cache entries are not ours.
func removals(lines []string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, "Deleted ") {
			out = append(out, l)
		}
	}
	return out
}

// deletions counts the removals by kind: the LB links and the target
// links (a link is one the proxy's namespace held as a bridge port: its
// name says which service it serves), addresses, routes of our protocol
// (202), rules.
type deletions struct{ lbLinks, targetLinks, addrs, routes, rules int }

func countDeletions(lines []string, lbService string) deletions {
	var d deletions
	seen := map[string]bool{}
	for _, l := range lines {
		switch {
		case strings.Contains(l, " mtu "):
			// "Deleted 4: <name>@<peer>: <flags> mtu ...", once per link.
			name, _, _ := strings.Cut(l[strings.Index(l, ": ")+2:], "@")
			if seen[name] {
				continue
			}
			seen[name] = true
			if strings.HasPrefix(name, lbService[:min(len(lbService), 10)]) {
				d.lbLinks++
			} else {
				d.targetLinks++
			}
		case strings.Contains(l, " inet"):
			d.addrs++
		case strings.Contains(l, " lookup "):
			d.rules++
		case strings.Contains(l, "proto 202"):
			d.routes++
		}
	}
	return d
}

func (d deletions) String() string {
	return fmt.Sprintf("LB links %d, target links %d, addresses %d, our routes %d, rules %d", d.lbLinks, d.targetLinks, d.addrs, d.routes, d.rules)
}

// TestProxyRestartInPlace restarts the proxy in its namespace 20 times in a
// row (CAUSEWAY_E2E_INPLACE_ROUNDS changes the count) with TCP and UDP
// probes to a VIP of each family running, alternating a SIGTERM (as the
// kubelet stops a container whose image changed) and a SIGKILL (a crash),
// while `ip monitor` in the proxy's namespace records every link, address,
// route and rule deleted. Every fifth restart is made with the IPAM and the
// nsp stopped first and started again only after the new proxy (which waits
// for the IPAM). Asserted for every restart: the lab is green again; no VIP
// rule is deleted; the LB links, their addresses and the ECMP routes are
// kept (a stopping proxy leaves its LB connections, the next run resumes
// them on their links); the targets' links are kept too, no address is
// deleted in the proxy's namespace, and every target's NSM interface has
// the same index and the same addresses as before the restarts (the
// targets re-request as they are, the forwarder keeps their veths while
// the connections move to the new run's URL, docs/reliability.md).
// Reported for each restart: the probes lost, the longest gap and what was
// deleted, and the totals.
func TestProxyRestartInPlace(t *testing.T) {
	rounds := 20
	if v, err := strconv.Atoi(os.Getenv("CAUSEWAY_E2E_INPLACE_ROUNDS")); err == nil && v > 0 {
		rounds = v
	}
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(rounds)*time.Minute+2*time.Minute)
	defer cancel()
	ps := map[string]*traffic.Prober{}
	for _, v4 := range []bool{true, false} {
		family := map[bool]string{true: "IPv4", false: "IPv6"}[v4]
		for network, p := range startProbers(t, ctx, l, vipOf(t, l, v4)) {
			ps[family+" "+network] = p
		}
	}
	waitProbes(t, ps, time.Time{}, 20, "probes before the restarts")
	watch := watchKernel(t, l.NetNSPath("proxy"))
	targets := targetInterfaces(t, l)

	start := time.Now()
	totalLost, totalProbes := 0, 0
	lost := map[string][]int{}
	for r := 1; r <= rounds; r++ {
		how := restartHow(r)
		from := mark(ps, fmt.Sprintf("restart %d", r))
		how.restart(t, l)
		requireGreen(t, ctx, l, waitLong, fmt.Sprintf("restart %d (%s)", r, how.name))
		// Green means every target and LB has reached the new run; the
		// probes after that show the data path as the new run keeps it.
		to := waitProbes(t, ps, time.Now(), 10, fmt.Sprintf("probes after restart %d", r))
		n, probes, gap := 0, 0, time.Duration(0)
		for _, name := range slices.Sorted(maps.Keys(ps)) {
			s := ps[name].Series().After(from).Before(to)
			n += s.Failures()
			probes += len(s)
			gap = max(gap, s.LongestGap().Len())
		}
		totalLost += n
		totalProbes += probes
		lost[how.name] = append(lost[how.name], n)
		d := countDeletions(removals(watch.take()), "load-balancer")
		t.Logf("FIGURE: proxy restart in place %d of %d (%s): %d of %d probes lost (TCP and UDP, both families), longest gap %v; deleted: %v",
			r, rounds, how.name, n, probes, gap.Round(time.Millisecond), d)
		require.Zero(t, d.rules, "restart %d (%s): no VIP rule is deleted", r, how.name)
		require.Zero(t, d.lbLinks, "restart %d (%s): the LB connections are left by the stop and resumed on their links", r, how.name)
		require.Zero(t, d.routes, "restart %d (%s): the ECMP routes stay", r, how.name)
		require.Zero(t, d.targetLinks, "restart %d (%s): the targets' links are kept", r, how.name)
		require.Zero(t, d.addrs, "restart %d (%s): no address is deleted", r, how.name)
		require.Equal(t, targets, targetInterfaces(t, l), "restart %d (%s): every target keeps its interface and its addresses", r, how.name)
	}
	for _, name := range slices.Sorted(maps.Keys(ps)) {
		s := ps[name].Stop().After(start)
		t.Logf("FIGURE: proxy restart in place, %d restarts (%s): %v", rounds, name, s)
	}
	for _, how := range slices.Sorted(maps.Keys(lost)) {
		n := lost[how]
		t.Logf("FIGURE: proxy restart in place by %s: probes lost per restart %d to %d", how, slices.Min(n), slices.Max(n))
	}
	t.Logf("FIGURE: proxy restarted in place %d times under traffic in %v: %d of %d probes lost in total",
		rounds, time.Since(start).Round(time.Second), totalLost, totalProbes)
}

// targetInterfaces describes each target's NSM interface in its namespace:
// its index and its addresses.
func targetInterfaces(t *testing.T, l *labrun.Lab) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, name := range l.Targets() {
		ns, err := netns.GetFromPath(l.NetNSPath(name))
		require.NoError(t, err)
		h, err := netlink.NewHandleAt(ns)
		ns.Close()
		require.NoError(t, err)
		link, err := h.LinkByName(targetstub.DefaultInterfaceName)
		if err != nil {
			h.Close()
			out[name] = err.Error()
			continue
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
		h.Close()
		require.NoError(t, err)
		var s []string
		for _, a := range addrs {
			if !a.IP.IsLinkLocalUnicast() {
				s = append(s, a.IPNet.String())
			}
		}
		slices.Sort(s)
		out[name] = fmt.Sprintf("index %d, %v", link.Attrs().Index, s)
	}
	return out
}

// restartKind is a way the proxy is restarted in place.
type restartKind struct {
	name    string
	restart func(t *testing.T, l *labrun.Lab)
}

// restartHow alternates a graceful stop and a kill; every fifth restart
// is made with the IPAM and the nsp away.
func restartHow(round int) restartKind {
	if round%5 == 0 {
		return awayRestart(stopOrKill(round))
	}
	return stopOrKill(round)
}

// stopOrKill is a graceful stop for odd rounds, a kill for even ones.
func stopOrKill(round int) restartKind {
	if round%2 == 1 {
		return restartKind{"SIGTERM", func(t *testing.T, l *labrun.Lab) {
			require.NoError(t, l.RestartComponent("proxy", stopGrace))
		}}
	}
	return restartKind{"SIGKILL", func(t *testing.T, l *labrun.Lab) {
		require.NoError(t, l.KillProxy())
		require.NoError(t, l.StartProxy())
	}}
}

// awayRestart is how with the IPAM and the nsp stopped first: the proxy
// starts without them (it waits for its bridge addresses) and they start
// again a few seconds later, while it waits.
func awayRestart(how restartKind) restartKind {
	return restartKind{how.name + ", IPAM and nsp away", func(t *testing.T, l *labrun.Lab) {
		for _, c := range []string{"ipam", "nsp"} {
			require.NoError(t, l.StopComponent(c, stopGrace))
		}
		back := make(chan error, 1)
		go func() {
			time.Sleep(3 * time.Second)
			back <- errors.Join(l.StartComponent("nsp"), l.StartComponent("ipam"))
		}()
		how.restart(t, l)
		require.NoError(t, <-back, "the IPAM and the nsp start again")
	}}
}
