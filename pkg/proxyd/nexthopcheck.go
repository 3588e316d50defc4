package proxyd

import (
	"context"
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// startNexthopCheck starts the datapath check of the LB nexthops (unless
// NSM_NEXTHOP_CHECK_OFF): it watches the proxy's nexthops on the bridge and
// tells the proxy those found down, which leave their family's route
// through the desired state (docs/dataplane.md). It comes after the proxy.
// Its stop ends the feeding, closes the check and gives every nexthop back.
func (d *Daemon) startNexthopCheck(ctx context.Context) (func() error, error) {
	log := d.log.With("subsystem", "nexthopcheck")
	// The callback reads c: it is called only after a Watch, which comes
	// after c is set (and the Checker's lock orders the two).
	var c *nexthopcheck.Checker
	c, err := nexthopcheck.New(d.cfg.NexthopCheck(), nexthopcheck.WithLogger(log),
		nexthopcheck.WithNetNS(d.opts.serviceNetNS),
		nexthopcheck.WithOnChange(func([]nexthopcheck.Change) { d.proxy.SetNexthopsDown(downOf(c.Statuses())) }))
	if err != nil {
		return nil, err
	}
	d.hopCheck = c
	changed, unwatch := d.proxy.WatchTargets() // signalled at each change of the model
	t := newTasks(ctx)
	t.Go(func(ctx context.Context) {
		defer unwatch()
		var last []netip.Addr
		var bridge int
		for {
			last, bridge = d.feedNexthopCheck(last, bridge)
			select {
			case <-ctx.Done():
				return
			case <-changed:
			}
		}
	})
	return func() error {
		_ = t.stop()
		err := c.Close()
		d.proxy.SetNexthopsDown(nil)
		return err
	}, nil
}

// feedNexthopCheck hands the proxy's nexthops to the check when they, or the
// bridge's link index, changed since last.
func (d *Daemon) feedNexthopCheck(last []netip.Addr, lastBridge int) ([]netip.Addr, int) {
	hops := d.proxy.Nexthops()
	bridge := 0
	if l, ok := d.dp.LinkByName(d.cfg.BridgeName); ok {
		bridge = l.Index
	}
	if bridge == lastBridge && slices.Equal(hops, last) {
		return last, lastBridge
	}
	peers := make([]nexthopcheck.Peer, len(hops))
	for i, a := range hops {
		peers[i] = nexthopcheck.Peer{Addr: a, LinkIndex: bridge}
	}
	_ = d.hopCheck.Watch(peers) // an error leaves the peers unchecked; the check logs it
	// A nexthop gone from the model is gone from the check without a
	// change: the down set is read again.
	d.proxy.SetNexthopsDown(downOf(d.hopCheck.Statuses()))
	return hops, bridge
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
