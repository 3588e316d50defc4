package kube_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// strayPackets is how many packets a link of the external host may carry
// with no flow through it: neighbour upkeep (ARP, ND), not traffic.
const strayPackets = 4

// switchTraffic (Meridio's MT-Switch): the external host's traffic moves
// from one other trench's VIPs to the other's, as a client told to use
// the second trench does: probes of the first trench's VIPs (TCP and UDP,
// both families), then of the second's, begun as the first stop. Each
// series loses no probe beyond a blip and is answered by its own trench's
// targets only; once the switch is made, the first trench's links from
// the external host carry no traffic and both of the second's carry it.
// The time from the switch to the first answer is a figure.
func (tr *trench) switchTraffic(ctx context.Context, t *testing.T, others []otherTrench, views []trenchView) {
	from, to := others[0], others[1]
	fromView, toView := views[1], views[2]
	stopFrom := tr.probeVIPs(ctx, t, from.vips)
	time.Sleep(2 * time.Second)
	switched := time.Now()
	stopTo := tr.probeVIPs(ctx, t, to.vips)
	fromSeries := stopFrom()
	// The first series's last flows close within a probe's timeout.
	time.Sleep(500 * time.Millisecond)
	stats := tr.extLinkStats(t)
	time.Sleep(2 * time.Second)
	toSeries := stopTo()
	delta := traffic.Delta(stats, tr.extLinkStats(t))

	for _, part := range []struct {
		series map[string]traffic.Series
		v      trenchView
	}{{fromSeries, fromView}, {toSeries, toView}} {
		for name, s := range part.series {
			names := podNames(part.v.targets)
			for target := range s.Targets() {
				if !slices.Contains(names, target) {
					t.Errorf("%s answered by %s, not a target of %s (%v)", name, target, part.v.name, names)
				}
			}
		}
		noOutages(t, part.series, "the traffic switched to "+to.name, switched)
	}
	var first time.Duration
	for name, s := range toSeries {
		at, ok := s.FirstOKAfter(switched)
		if !ok {
			t.Errorf("%s: no answer after the switch", name)
			continue
		}
		first = max(first, at.Sub(switched))
	}
	for i := range fromView.lbs {
		if d := delta[extLink(from.firstLink+i)]; d.TxPackets > strayPackets || d.RxPackets > strayPackets {
			t.Errorf("the link %s to %s's LB carried %+v after the switch", extLink(from.firstLink+i), from.name, d)
		}
	}
	for i := range toView.lbs {
		if d := delta[extLink(to.firstLink+i)]; d.TxPackets == 0 || d.RxPackets == 0 {
			t.Errorf("the link %s to %s's LB carried %+v after the switch", extLink(to.firstLink+i), to.name, d)
		}
	}
	fLost, fTotal, _ := sumSeries(fromSeries)
	tLost, tTotal, tLongest := sumSeries(toSeries)
	t.Logf("FIGURE: traffic switched from %s's VIPs to %s's (MT-Switch): every series of the second answered %s after the switch; %d of %d probes lost before it, %d of %d after (longest gap %s)",
		from.name, to.name, first.Round(time.Millisecond), fLost, fTotal, tLost, tTotal, tLongest.Round(time.Millisecond))
}

// extLinkStats reads the packet counters of the external host's links.
func (tr *trench) extLinkStats(t *testing.T) map[string]traffic.LinkStat {
	t.Helper()
	stats, err := traffic.LinkStats(tr.ext.ns.Path())
	if err != nil {
		t.Fatal(fmt.Errorf("the external host: %w", err))
	}
	return stats
}
