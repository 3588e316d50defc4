package labrun

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// Status writes what the run is made of: its components (running with
// their pid, or how they ended), namespaces with their addresses, the
// proxy's bridge ports, rules and routes, and the targets' published
// addresses. It returns what the run expects to run and does not (the
// process that runs the lab, and the components that crashed, ended by
// themselves or never started; not those stopped on request), as
// notRunning describes them: a lab is healthy when that is empty.
func (l *Lab) Status(w io.Writer) (down []string, err error) {
	if err := l.refresh(); err != nil {
		return nil, err
	}
	st := l.state()
	rs := l.run.State()
	owner := "not running"
	if l.ownerRunning() {
		owner = fmt.Sprintf("pid %d", st.OwnerPID)
	}
	fmt.Fprintf(w, "lab %s  created %s  dir %s  owner (lab run) %s\n",
		st.ID, rs.Created.Format("2006-01-02 15:04:05Z"), l.run.Dir, owner)
	fmt.Fprintf(w, "trench %s  conduit %s  namespace %s  VIPs %v  echo port %d\n", st.Trench, st.Conduit, st.Namespace, st.VIPs, st.EchoPort)
	fmt.Fprintf(w, "logs %s (kept after the teardown)\n\n", l.LogDir())

	states := l.ComponentStates()
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tEXIT\tLOG")
	for _, c := range states {
		pid := "-"
		if c.PID != 0 {
			pid = fmt.Sprint(c.PID)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", c.Name, pid, c.State(), c.How(), l.Logs(c.Name))
	}
	_ = tw.Flush()
	down = l.notRunning(states)
	if len(down) > 0 {
		fmt.Fprintf(w, "NOT RUNNING (expected to): %s\n", strings.Join(down, ", "))
	}
	for _, c := range append(slices.Clone(st.LBs), st.Targets...) {
		if broken, _ := l.Broken(c); broken {
			fmt.Fprintf(w, "BROKEN: %s's datapath toward the proxy (lab break; lab mend %s undoes it)\n", c, c)
		}
	}

	fmt.Fprintln(w, "\nMETRICS (Prometheus /metrics; e.g. ip netns exec <netns> wget -qO- http://127.0.0.1:<port>/metrics)")
	for _, m := range []struct {
		component, role string
		port            int
	}{{"proxy", "proxy", proxyMetricsPort}, {"ipam", "ctl", ipamMetricsPort}, {"nsp", "ctl", nspMetricsPort}} {
		fmt.Fprintf(w, "  %-6s netns %s  127.0.0.1:%d\n", m.component, l.NetNS(m.role), m.port)
	}

	fmt.Fprintln(w, "\nNAMESPACES")
	var seen []string
	for _, ns := range rs.NetNS {
		if slices.Contains(seen, ns) {
			continue
		}
		seen = append(seen, ns)
		if _, err := os.Stat(topo.NetNSPath(ns)); err != nil {
			fmt.Fprintf(w, "%s (gone)\n", ns)
			continue
		}
		out, _ := execCommand("ip", "-n", ns, "-br", "addr")
		fmt.Fprintf(w, "%s\n%s\n", ns, indent(out))
	}

	proxyNS := l.NetNS("proxy")
	if _, err := os.Stat(topo.NetNSPath(proxyNS)); err == nil {
		fmt.Fprintln(w, "\nPROXY")
		ports, _ := bridgePorts(topo.NetNSPath(proxyNS))
		fmt.Fprintf(w, "  %s ports: %s\n", bridgeIf, strings.Join(ports, " "))
		for _, args := range [][]string{
			{"-4", "rule"}, {"-6", "rule"},
			{"-4", "route", "show", "table", fmt.Sprint(table)}, {"-6", "route", "show", "table", fmt.Sprint(table)},
		} {
			out, _ := execCommand("ip", append([]string{"-n", proxyNS}, args...)...)
			fmt.Fprintf(w, "  ip %s\n%s\n", strings.Join(args, " "), indent(indent(out)))
		}
	}

	extNS := l.NetNS("ext")
	if _, err := os.Stat(topo.NetNSPath(extNS)); err == nil {
		fmt.Fprintln(w, "\nEXTERNAL HOST routes")
		for _, fam := range []string{"-4", "-6"} {
			out, _ := execCommand("ip", "-n", extNS, fam, "route")
			fmt.Fprintf(w, "%s\n", indent(out))
		}
	}

	fmt.Fprintln(w, "\nTARGETS (published addresses)")
	pubs, _ := targetaddrs.Read(l.TargetsDir())
	for _, t := range st.Targets {
		fmt.Fprintf(w, "  %s: %v\n", t, pubs[t])
	}
	return down, nil
}

func indent(s string) string {
	if s == "" {
		return "  (none)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
