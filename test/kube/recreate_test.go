package kube_test

import (
	"context"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// claimUID is the UID of the IPAM's claim of o (empty when it has none).
func (c *cluster) claimUID(ctx context.Context, o otherTrench) types.UID {
	claim, err := c.client.CoreV1().PersistentVolumeClaims(o.namespace).Get(ctx, o.claim(), metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return claim.UID
}

// recreateTrench (Meridio's delete-create-trench): the other trench o,
// uninstalled with nothing of it left, installed again under its name
// while the external host probes the suite's VIPs. The new one is served
// from scratch: its IPAM on a new claim (firstClaim was the first's), its
// pods Ready, every target answering on its VIPs with one address of each
// of its pools that no other target holds, and isolated from the suite's
// trench as the first was. It is then uninstalled again: nothing of it
// left. The suite's VIPs' loss and the times are figures.
func (tr *trench) recreateTrench(ctx context.Context, t *testing.T, o otherTrench, base string, firstClaim types.UID, suite trenchView) {
	c := tr.c
	stop := tr.probeEveryVIP(ctx, t)
	time.Sleep(time.Second)
	start := time.Now()
	tr.dropExtLinks(t, o.firstLink, 2)
	c.installOther(ctx, t, o, base)
	view := tr.waitOther(ctx, t, o)
	served := time.Since(start)
	if uid := c.claimUID(ctx, o); uid == "" || uid == firstClaim {
		t.Errorf("the IPAM of the new %s has the claim %q, the first's was %q", o.name, uid, firstClaim)
	}
	addrs := map[string][]netip.Addr{}
	for _, p := range view.targets {
		for _, a := range nsAddrs(t, c.podNetNS(ctx, t, p, "stub")) {
			if slices.ContainsFunc(o.pools, func(pool netip.Prefix) bool { return pool.Contains(a) }) {
				addrs[p.Name] = append(addrs[p.Name], a)
			}
		}
		slices.SortFunc(addrs[p.Name], netip.Addr.Compare)
	}
	checkUnique(t, addrs)
	tr.checkServedApart(ctx, t, []trenchView{suite, view})
	c.checkIsolated(ctx, t, []trenchView{suite, view})

	again := time.Now()
	c.deleteOtherStubs(t, o)
	helm(t, "uninstall", o.name, "--namespace", o.namespace, "--wait")
	c.waitPodsGone(t, o.namespace, o.stubSelector())
	c.waitPodsGone(t, o.namespace, "app.kubernetes.io/instance="+o.name)
	c.waitClaimGone(t, o.namespace, o.claim())
	eventually(ctx, t, "nothing of "+o.name+" left", func(ctx context.Context) error { return c.otherLeft(ctx, o) })
	gone := time.Since(again)
	// A figure, not a promise, as when the trenches were first installed.
	lost, total, longest := reportLoss(t, stop(), o.name+" was created again and uninstalled")
	c.removeOther(t, o)
	t.Logf("FIGURE: trench deleted and created again (%s, helm install after its uninstall): every pod Ready and every target answering on its VIPs after %.1f s, on a new claim; uninstalled again, nothing of it left after %.1f s; the suite's VIPs meanwhile: %d of %d probes lost, longest gap %s",
		o.name, served.Seconds(), gone.Seconds(), lost, total, longest.Round(time.Millisecond))
}

// dropExtLinks removes the external host's links to the LBs first to
// first+n-1 that are still there (their LB pods gone or going).
func (tr *trench) dropExtLinks(t *testing.T, first, n int) {
	t.Helper()
	withHandle(t, tr.ext.ns.Path(), func(h *netlink.Handle) {
		for i := first; i < first+n; i++ {
			if l, err := h.LinkByName(extLink(i)); err == nil {
				if err := h.LinkDel(l); err != nil {
					t.Fatalf("remove the link %s: %v", extLink(i), err)
				}
			}
		}
	})
}
