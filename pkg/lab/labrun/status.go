package labrun

import (
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/causeway-net/causeway/pkg/lab/pubdir"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// Status writes what the run is made of: its components (pid, running),
// namespaces with their addresses, the proxy's bridge ports, rules and
// routes, and the targets' published addresses.
func (l *Lab) Status(w io.Writer) error {
	st := l.state()
	rs := l.run.State()
	owner := "not running"
	if topo.Alive(st.OwnerPID, st.OwnerStartTime) {
		owner = fmt.Sprintf("pid %d", st.OwnerPID)
	}
	cp := "not running"
	for _, p := range rs.Processes { // the last one recorded under the name
		if p.Name == "nsm" {
			cp = "not running"
			if topo.Alive(p.PID, p.StartTime) {
				cp = fmt.Sprintf("pid %d", p.PID)
			}
		}
	}
	fmt.Fprintf(w, "lab %s  created %s  dir %s  owner (lab run) %s  NSM control plane (lab nsm) %s\n",
		st.ID, rs.Created.Format("2006-01-02 15:04:05Z"), l.run.Dir, owner, cp)
	fmt.Fprintf(w, "trench %s  conduit %s  namespace %s  VIPs %v  echo port %d\n\n", st.Trench, st.Conduit, st.Namespace, st.VIPs, st.EchoPort)

	// Components: the last process recorded under each name.
	last := map[string]topo.Process{}
	var names []string
	for _, p := range rs.Processes {
		if _, ok := last[p.Name]; !ok {
			names = append(names, p.Name)
		}
		last[p.Name] = p
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "COMPONENT\tPID\tSTATE\tLOG")
	for _, n := range names {
		p := last[n]
		state := "exited"
		if topo.Alive(p.PID, p.StartTime) {
			state = "running"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\n", n, p.PID, state, l.Logs(n))
	}
	_ = tw.Flush()

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
	pubs, _ := pubdir.Read(l.TargetsDir())
	for _, t := range st.Targets {
		fmt.Fprintf(w, "  %s: %v\n", t, pubs[t])
	}
	return nil
}

func indent(s string) string {
	if s == "" {
		return "  (none)"
	}
	return "  " + strings.ReplaceAll(s, "\n", "\n  ")
}
