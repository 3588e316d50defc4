package kube_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// The chart's VIPs as the example values install them (chartVIPs), and
// with the spare ones (spareVIPs) added; the names are the example's, to
// which its port NAT refers. Helm replaces a list: each is the whole list.
const (
	installedVIPsValues = `
vips:
  - {name: vip-v4, address: 20.0.0.1/32}
  - {name: vip-v6, address: "2001:db8::1/128"}
`
	spareVIPsValues = installedVIPsValues + `  - {name: vip-v4-spare, address: 20.0.0.2/32}
  - {name: vip-v6-spare, address: "2001:db8::2/128"}
`
)

// ctCountTable makes conntrack track the flows that a proxy forwards,
// whatever its service load balancer uses: a table of the suite's own in
// the proxy's namespace, which the proxy leaves alone.
const ctCountTable = "cw-test-ct"

// changeVIPs: VIPs added to the chart and removed again while the
// external host probes every installed VIP (TCP and UDP). Added (helm
// upgrade: the nsp's pod rolls, the proxies follow its watch), every
// proxy has a rule from each new VIP and every target answers on it,
// after times reported as figures. Removed again (the trench as
// installed), every proxy's rule from it is gone, and so are the
// conntrack entries of its flows in every proxy's namespace, while the
// installed VIPs keep their rules and entries. Neither change cuts a
// probe of an installed VIP, nor replaces or restarts a proxy.
func (tr *trench) changeVIPs(ctx context.Context, t *testing.T) {
	proxies := tr.c.proxyPods(ctx, t)
	var paths []string
	for _, p := range proxies {
		path := tr.c.podNetNS(ctx, t, p, proxyContainer)
		nftIn(t, path, "table inet "+ctCountTable+" {\n\tchain forward { type filter hook forward priority 0; ct state new counter; }\n}")
		t.Cleanup(func() { nftDeleteTable(path, ctCountTable) })
		paths = append(paths, path)
	}
	names := tr.targetNames(ctx, t)
	stop, start, ruled := tr.addSpareVIPs(ctx, t, paths)
	tr.waitServedBy(ctx, t, spareVIPs, names)
	served := time.Since(start)
	lost, total, longest := noOutages(t, stop(), "VIPs were added", start)
	t.Logf("FIGURE: VIPs added (helm upgrade of the vips): every proxy's rule after %.1f s, every target answers on them after %.1f s; the installed VIPs: %d of %d probes lost, longest gap %s",
		ruled.Seconds(), served.Seconds(), lost, total, longest.Round(time.Millisecond))
	entries := 0
	for _, vip := range spareVIPs {
		n := 0
		for _, path := range paths {
			n += conntrackEntries(t, path, vip)
		}
		if n == 0 {
			t.Fatalf("no conntrack entry of the flows to %s in the proxies' namespaces", vip)
		}
		entries += n
	}

	stop = tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start = time.Now()
	helmUpgradeValues(t, installedVIPsValues)
	eventually(ctx, t, "every proxy's rules from the removed VIPs gone", func(context.Context) error {
		return rulesFrom(t, paths, spareVIPs, false)
	})
	unruled := time.Since(start)
	eventually(ctx, t, "the removed VIPs' conntrack entries gone in every proxy's namespace", func(context.Context) error {
		for _, path := range paths {
			for _, vip := range spareVIPs {
				if n := conntrackEntries(t, path, vip); n != 0 {
					return fmt.Errorf("%d entries of %s in %s", n, vip, path)
				}
			}
		}
		return nil
	})
	flushed := time.Since(start)
	lost, total, longest = noOutages(t, stop(), "VIPs were removed", start)
	t.Logf("FIGURE: VIPs removed (helm upgrade of the vips): every proxy's rule gone after %.1f s, their %d conntrack entries after %.1f s; the installed VIPs: %d of %d probes lost, longest gap %s",
		unruled.Seconds(), entries, flushed.Seconds(), lost, total, longest.Round(time.Millisecond))
	if err := rulesFrom(t, paths, chartVIPs, true); err != nil {
		t.Errorf("the installed VIPs: %v", err)
	}
	for _, path := range paths {
		for _, vip := range chartVIPs {
			if conntrackEntries(t, path, vip) == 0 {
				t.Errorf("no conntrack entry of the installed VIP %s left in %s", vip, path)
			}
		}
	}
	now := tr.c.proxyPods(ctx, t)
	for i, p := range proxies {
		if now[i].UID != p.UID || restarts(now[i]) != restarts(p) {
			t.Errorf("proxy %s (%d restarts) is now %s (%d restarts)", p.Name, restarts(p), now[i].Name, restarts(now[i]))
		}
	}
}

// rulesFrom says whether each namespace of paths has a rule from each of
// vips to the proxy's table (want), or none (!want).
func rulesFrom(t *testing.T, paths []string, vips []netip.Addr, want bool) error {
	t.Helper()
	for _, path := range paths {
		rules := vipRules(t, path)
		for _, vip := range vips {
			if slices.Contains(rules, vip) != want {
				return fmt.Errorf("%s has rules from %v; want a rule from %s: %v", path, rules, vip, want)
			}
		}
	}
	return nil
}
