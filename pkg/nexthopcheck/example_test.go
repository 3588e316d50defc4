package nexthopcheck_test

import (
	"fmt"
	"log/slog"
	"net/netip"
	"os"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// A caller watches its LB nexthops on the bridge and turns each change into
// a new desired state; Statuses feed -debug and the metrics.
func Example() {
	const bridge = 2 // the bridge's link index
	c, err := nexthopcheck.New(nexthopcheck.Settings{},
		nexthopcheck.WithLogger(slog.New(slog.NewJSONHandler(os.Stderr, nil))),
		nexthopcheck.WithOnChange(func(changes []nexthopcheck.Change) {
			for _, ch := range changes {
				fmt.Println(ch.Peer, ch.State) // the caller recomputes its desired state here
			}
		}))
	if err != nil {
		panic(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Watch([]nexthopcheck.Peer{
		{Addr: netip.MustParseAddr("172.16.0.2"), LinkIndex: bridge},
		{Addr: netip.MustParseAddr("fd00::2"), LinkIndex: bridge},
	}); err != nil {
		fmt.Println("unchecked:", err) // e.g. nexthopcheck.ErrNotPermitted
	}
	for _, s := range c.Statuses() {
		fmt.Println(s.Addr, s.State, s.Sent, s.Lost)
	}
}
