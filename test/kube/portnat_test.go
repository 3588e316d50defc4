package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
)

// chartConduit is the example values' conduit.
const chartConduit = "load-balancer"

// portNATTable holds, in each LB stub's namespace, the conduit's
// destination-port NATs while the scenario runs.
const portNATTable = "cw-test-portnat"

// portNAT is a destination-port NAT of the conduit: a flow to vip:port
// reaches the targets on vip:targetPort.
type portNAT struct {
	vip              netip.Addr
	port, targetPort uint16
	protocol         string // tcp or udp
}

// public is where the flows of n go; private where the targets see them.
func (n portNAT) public() netip.AddrPort  { return netip.AddrPortFrom(n.vip, n.port) }
func (n portNAT) private() netip.AddrPort { return netip.AddrPortFrom(n.vip, n.targetPort) }

// portNATs: the conduit's destination-port NATs, as the chart gives them
// to its nsp, exercised by traffic from outside while the external host
// probes every VIP. Nothing in Causeway applies them: the LBs do
// (Meridio's stateless LB, from the nsp's conduit). The LB stubs do not
// ask the nsp, so the scenario sets each one's rules as such an LB does,
// without connection tracking (a reply may leave by the other LB): on the
// way in, the destination port of a flow from outside to the VIP's public
// port becomes the target port; on the way out, the source port of the
// targets' replies becomes the public port again. Before the rules, a
// flow to the public port is refused (no target listens there); with
// them, every target answers it (the targets' echo on the target port,
// servicePort), through Causeway's data path and through both LBs (the
// counters of the rules). The LBs' rules go when the scenario ends.
func (tr *trench) portNATs(ctx context.Context, t *testing.T) {
	nats := tr.c.chartPortNATs(ctx, t)
	names := tr.targetNames(ctx, t)
	for _, n := range nats {
		if n.targetPort != servicePort {
			t.Fatalf("%+v: the targets answer on port %d only", n, servicePort)
		}
		if _, err := traffic.Ask(ctx, tr.ext.ns.Path(), n.protocol, extAddrs[n.vip.Is6()], n.public(), 2*time.Second); err == nil {
			t.Fatalf("a flow to %s %s answered before the LBs' NATs", n.protocol, n.public())
		}
	}
	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	var paths []string
	for _, lb := range tr.ext.lbs {
		path := tr.c.podNetNS(ctx, t, lb, "stub")
		var links []string
		for _, l := range tr.c.conduitLinks(ctx, t, lb) {
			links = append(links, strconv.Quote(l.name))
		}
		nftIn(t, path, portNATRules(nats, links))
		t.Cleanup(func() { nftDeleteTable(path, portNATTable) })
		paths = append(paths, path)
	}
	var figures []string
	for _, n := range nats {
		tr.waitAnswered(ctx, t, n.protocol, n.public(), names)
		served := time.Since(start)
		tally := tr.flowsTo(ctx, n.protocol, n.public(), 60)
		if tally.Errors != 0 {
			t.Errorf("%s %s → %s: %s", n.protocol, n.public(), n.private(), tally)
		}
		figures = append(figures, fmt.Sprintf("%s %s → %s answered by every target after %.1f s, then %d of %d flows lost",
			n.protocol, n.public(), n.private(), served.Seconds(), tally.Errors, tally.Total))
	}
	lost, total, longest := noOutages(t, stop(), "the LBs' port NATs were set", start)
	t.Logf("FIGURE: destination-port NATs at the LBs: %s; the VIPs' echo port meanwhile: %d of %d probes lost, longest gap %s",
		strings.Join(figures, "; "), lost, total, longest.Round(time.Millisecond))
	for i, path := range paths {
		for rule, packets := range natCounters(t, path) {
			if packets == 0 {
				t.Errorf("LB %s: no packet through its rule %q", tr.ext.lbs[i].Name, rule)
			}
		}
	}
}

// chartPortNATs returns the destination-port NATs of the conduit in the
// nsp's file as the chart rendered it (its ConfigMap), read with the nsp's
// own parser.
func (c *cluster) chartPortNATs(ctx context.Context, t *testing.T) []portNAT {
	t.Helper()
	cm, err := c.client.CoreV1().ConfigMaps(chartNamespace).Get(ctx, "nsp-config-"+chartRelease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := configfile.Parse([]byte(cm.Data["nsp.yaml"]))
	if err != nil {
		t.Fatalf("the nsp's file: %v", err)
	}
	vips := map[string]netip.Addr{}
	for _, v := range cfg.VIPs {
		if p, err := netip.ParsePrefix(v.Address); err == nil && p.IsSingleIP() {
			vips[v.Name] = p.Addr()
		}
	}
	var out []portNAT
	for _, cd := range cfg.Conduits {
		if cd.Name != chartConduit {
			continue
		}
		for _, n := range cd.DestinationPortNats {
			for _, name := range n.VIPs {
				vip, ok := vips[name]
				if !ok {
					t.Fatalf("the NAT %+v names %s, not a VIP of one address", n, name)
				}
				out = append(out, portNAT{vip: vip, port: uint16(n.Port), targetPort: uint16(n.TargetPort), protocol: strings.ToLower(n.Protocol)})
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("the conduit %s has no destination-port NAT", chartConduit)
	}
	return out
}

// portNATRules is the LB's table of nats, with links (quoted) its links to the
// proxies: rules before connection tracking (raw priority), counted.
func portNATRules(nats []portNAT, links []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "table inet %s {\n\tchain prerouting {\n\t\ttype filter hook prerouting priority -300; policy accept;\n", portNATTable)
	for _, n := range nats {
		ip := map[bool]string{true: "ip", false: "ip6"}[n.vip.Is4()]
		fmt.Fprintf(&b, "\t\tiifname %q %s daddr %s %s dport %d counter %s dport set %d\n", lbExtLink, ip, n.vip, n.protocol, n.port, n.protocol, n.targetPort)
		fmt.Fprintf(&b, "\t\tiifname { %s } %s saddr %s %s sport %d counter %s sport set %d\n", strings.Join(links, ", "), ip, n.vip, n.protocol, n.targetPort, n.protocol, n.port)
	}
	b.WriteString("\t}\n}\n")
	return b.String()
}

// counted is a rule of nft's listing with its counter's packets.
var counted = regexp.MustCompile(`^\s*(.*) counter packets (\d+) bytes \d+`)

// natCounters returns the packets that each rule of the LB's table of
// port NATs counted, by the rule's match.
func natCounters(t *testing.T, path string) map[string]int {
	t.Helper()
	out := nftList(t, path, "inet", portNATTable)
	rules := map[string]int{}
	for _, line := range strings.Split(out, "\n") {
		if m := counted.FindStringSubmatch(line); m != nil {
			rules[m[1]], _ = strconv.Atoi(m[2])
		}
	}
	if len(rules) == 0 {
		t.Fatalf("no counted rule in %s:\n%s", path, out)
	}
	return rules
}
