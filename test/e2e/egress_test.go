package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// egressPort is where the external host listens for target-originated flows.
const egressPort = 7000

// TestEgress is scenario 2: flows that targets originate with a VIP as
// source reach the external host, keep the VIP as source, and arrive over
// both LBs.
func TestEgress(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lis, err := traffic.ListenEgress(l.NetNSPath("ext"), egressPort)
	require.NoError(t, err)
	defer lis.Close()

	const perTarget = 32
	sent := map[string]netip.Addr{}
	for _, name := range l.Targets() {
		for _, vip := range vips(l) {
			tag := fmt.Sprintf("%s/%s", name, vip)
			n, err := traffic.DeliverEgress(ctx, lis, traffic.EgressFlows{
				NetNSPath: l.NetNSPath(name), Src: vip,
				Dst: netip.AddrPortFrom(extFor(l, vip), egressPort), Count: perTarget, Tag: tag,
			}, time.Second)
			require.NoError(t, err, "%d egress datagrams of %s arrive: %v", perTarget, tag, lis.ByIface(tag))
			require.GreaterOrEqual(t, n, perTarget)
			sent[tag] = vip
		}
	}

	// The external host's links are named after the LB index (lb0, lb1).
	perFamily := map[bool]map[string]int{true: {}, false: {}}
	for _, a := range lis.Arrivals() {
		vip, ok := sent[a.Tag]
		require.True(t, ok, "unexpected datagram %+v", a)
		require.Equal(t, vip, a.Src.Addr(), "the VIP is the source of %s", a.Tag)
		perFamily[vip.Is4()][a.Iface]++
	}
	for tag := range sent {
		by := lis.ByIface(tag)
		t.Logf("%s arrived: %v", tag, by)
		require.Len(t, by, len(l.LBs()), "%s: flows arrive over every LB", tag)
	}
	for v4, by := range perFamily {
		require.Len(t, by, len(l.LBs()), "IPv4=%v: flows arrive over every LB: %v", v4, by)
	}
}
