package proxyd

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"sync"

	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/pkg/health"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// startNexthopCheck starts the datapath check of the LB nexthops (unless
// NSM_NEXTHOP_CHECK_OFF): it watches the proxy's nexthops on the bridge and
// tells the proxy those found down, which leave their family's route
// through the desired state (docs/dataplane.md). With
// NSM_TARGET_CHECK_INTERVAL, a second check watches the targets, for the
// report only. Both report their down peers as the Datapath warning of the
// readiness. It comes after the proxy. Its stop ends the feeding and closes
// the checks.
func (d *Daemon) startNexthopCheck(ctx context.Context) (func() error, error) {
	// The callbacks read hops.c and targets.c: they are called only after a
	// Watch, which comes after both are set (and the Checkers' locks order
	// the two).
	hops, targets := &checkFeed{addrs: d.proxy.Nexthops}, &checkFeed{addrs: d.proxy.TargetAddrs}
	// report hands the nexthops found down to the proxy and sets the
	// readiness's warning. It is called from both checks' goroutines and
	// the feeding one: the lock makes the last state set the one read last.
	var reportMu sync.Mutex
	report := func() {
		reportMu.Lock()
		defer reportMu.Unlock()
		hs := hops.c.Statuses()
		d.proxy.SetNexthopsDown(downOf(hs))
		var ts []nexthopcheck.Status
		if targets.c != nil {
			ts = targets.c.Statuses()
		}
		d.health.SetWarning(health.Datapath, datapathWarning(hs, ts))
	}
	c, err := nexthopcheck.New(d.cfg.NexthopCheck(), nexthopcheck.WithLogger(d.log.With("subsystem", "nexthopcheck")),
		nexthopcheck.WithNetNS(d.opts.serviceNetNS),
		nexthopcheck.WithOnChange(func([]nexthopcheck.Change) { report() }))
	if err != nil {
		return nil, err
	}
	// A nexthop gone from the model is gone from the check without a
	// change: the down set is read again after each Watch.
	hops.c, hops.after = c, report
	d.hopCheck = c
	feeds := []*checkFeed{hops}
	if s, on := d.cfg.TargetCheck(); on {
		tc, err := nexthopcheck.New(s, nexthopcheck.WithLogger(d.log.With("subsystem", "targetcheck")),
			nexthopcheck.WithNetNS(d.opts.serviceNetNS),
			nexthopcheck.WithOnChange(func([]nexthopcheck.Change) { report() }))
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		d.targetCheck = tc
		targets.c, targets.after = tc, report
		feeds = append(feeds, targets)
	}
	changed, unwatch := d.proxy.WatchTargets() // signalled at each change of the model
	t := tasks.New(ctx)
	t.Go(func(ctx context.Context) {
		defer unwatch()
		for {
			bridge := 0
			if l, ok := d.dp.LinkByName(d.cfg.BridgeName); ok {
				bridge = l.Index
			}
			for _, f := range feeds {
				f.feed(bridge)
			}
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	})
	return func() error {
		_ = t.Stop()
		var errs []error
		for _, f := range feeds {
			errs = append(errs, f.c.Close())
		}
		// The proxy stops next: the routes stay as the last check left
		// them (a dead LB is not put back for the next run to adopt).
		return errors.Join(errs...)
	}, nil
}

// checkFeed keeps a Checker watching a set of addresses on the bridge.
type checkFeed struct {
	c      *nexthopcheck.Checker
	addrs  func() []netip.Addr
	after  func() // after each Watch (nil: nothing)
	last   []netip.Addr
	bridge int
}

// feed hands the addresses to the check when they, or the bridge's link
// index, changed since the last time.
func (f *checkFeed) feed(bridge int) {
	addrs := f.addrs()
	if bridge == f.bridge && slices.Equal(addrs, f.last) {
		return
	}
	f.last, f.bridge = addrs, bridge
	peers := make([]nexthopcheck.Peer, len(addrs))
	for i, a := range addrs {
		peers[i] = nexthopcheck.Peer{Addr: a, LinkIndex: bridge}
	}
	_ = f.c.Watch(peers) // an error leaves the peers unchecked; the check logs it
	if f.after != nil {
		f.after()
	}
}

// datapathWarning is the text of the Datapath warning: the LB nexthops
// and the targets found down ("" when none is).
func datapathWarning(hops, targets []nexthopcheck.Status) string {
	var out []string
	for _, a := range downOf(hops) {
		out = append(out, "nexthop "+a.String()+" down")
	}
	for _, a := range downOf(targets) {
		out = append(out, "target "+a.String()+" not answering")
	}
	return strings.Join(out, ", ")
}

// downOf is the addresses of the peers found down.
func downOf(statuses []nexthopcheck.Status) []netip.Addr {
	var out []netip.Addr
	for _, s := range statuses {
		if s.State == nexthopcheck.Down {
			out = append(out, s.Peer.Addr)
		}
	}
	return out
}
