package traffic

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"
)

// newFlowTries bounds the sockets AskUDPNew opens for one flow.
const newFlowTries = 8

// Tracked reports whether a conntrack table still holds a UDP flow from
// from to the address a flow is about to reach.
type Tracked func(from netip.AddrPort) (bool, error)

// AskUDPNew is Ask over UDP from a source port that tracked does not
// report: a datagram from the port of an earlier flow whose conntrack
// entry lives on (30 s after its last datagram) takes that flow's NAT
// decision instead of a new one, so a check of how new flows are spread
// must not send from it. A socket whose port is still tracked stays open
// until the answer, so that the kernel picks another port for the next.
func AskUDPNew(ctx context.Context, nsPath string, addr netip.AddrPort, timeout time.Duration, tracked Tracked) (string, error) {
	var held []net.Conn
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for range newFlowTries {
		c, err := dialIn(ctx, nsPath, "udp", netip.Addr{}, addr, timeout)
		if err != nil {
			return "", err
		}
		held = append(held, c)
		from := c.LocalAddr().(*net.UDPAddr).AddrPort()
		from = netip.AddrPortFrom(from.Addr().Unmap(), from.Port())
		old, err := tracked(from)
		if err != nil {
			return "", fmt.Errorf("udp %s from %s: conntrack: %w", addr, from, err)
		}
		if !old {
			return askUDP(c, addr, 1, timeout)
		}
	}
	return "", fmt.Errorf("udp %s: the conntrack table still holds a flow from each of the %d source ports tried", addr, newFlowTries)
}
