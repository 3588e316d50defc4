package dataplane_test

import (
	"context"
	"log"
	"log/slog"
	"net/netip"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// The proxy's use: start the Dataplane in its namespace, describe the
// kernel it wants whenever something changes, react to links that go away,
// and flush the conntrack entries of a removed target.
func Example() {
	ctx := context.Background()
	dp, err := dataplane.New(ctx, dataplane.Options{
		Logger:  slog.Default(),
		MACFile: "/var/lib/causeway/bridge-mac",
	})
	if err != nil {
		log.Fatal(err)
	}
	defer dp.Close() // or dp.Teardown() to remove the bridge, routes and rules

	events, cancel := dp.Subscribe()
	defer cancel()
	go func() {
		for ev := range events {
			if ev.Type == dataplane.LinkDeleted {
				log.Printf("interface %d (%s, %s) is gone", ev.Index, ev.Name, ev.Kind)
			}
		}
	}()

	lbPort := 7 // the index of the NSM interface toward an LB
	lb := netip.MustParseAddr("172.16.1.3")
	err = dp.Apply(dataplane.State{
		BridgeAddrs: []netip.Prefix{netip.MustParsePrefix("172.16.1.1/24"), netip.MustParsePrefix("fd00:0:0:1::1/64")},
		// The LB's port with its address tied to it, and a target's port in
		// hairpin mode (for the service load balancer).
		Ports:    []dataplane.Port{{Index: lbPort, Nexthops: []netip.Addr{lb}}, {Index: 8, Hairpin: true}},
		Nexthops: []netip.Addr{lb},
		VIPs:     []netip.Prefix{netip.MustParsePrefix("20.0.0.1/32")},
	})
	if err != nil {
		log.Print(err) // each failure names its object; the Dataplane retries
	}
	_ = dp.FlushConntrack(netip.MustParseAddr("172.16.1.7"))
}
