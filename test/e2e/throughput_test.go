package e2e_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// throughputTime is how long each throughput measurement runs.
const throughputTime = time.Second

// startEchoIn serves, in the namespace at nsPath, TCP on addr: a greeting
// line, then an echo of what the peer sends, line by line (as the targets'
// echo does).
func startEchoIn(t *testing.T, nsPath string, addr netip.AddrPort) {
	t.Helper()
	var l net.Listener
	require.NoError(t, netnsdo.DoPath(nsPath, func() error {
		var err error
		l, err = net.Listen("tcp", addr.String())
		return err
	}))
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err != nil {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := c.Write([]byte("direct\n")); err != nil {
					return
				}
				// Line by line, as the targets' echo does, so that only the
				// path differs between the two measurements.
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadBytes('\n')
					if len(line) > 0 {
						if _, err := c.Write(line); err != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		wg.Wait()
	})
}

// TestThroughputFigure measures, for docs/performance.md, TCP throughput from the
// external host to a target through the LB and the proxy against that over
// a direct veth between two namespaces, and reports the ratio. It asserts
// only that data flows: speed is a figure, not a pass criterion.
func TestThroughputFigure(t *testing.T) {
	l := newLab(t, func(o *labrun.Options) { o.Targets = 1 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	vip := vipOf(t, l, true)
	lab, err := traffic.Throughput(ctx, l.NetNSPath("ext"), extFor(l, vip), netip.AddrPortFrom(vip, echoPort), throughputTime)
	require.NoError(t, err)

	a := testutil.NewNetNS(t, "tpa")
	b := testutil.NewNetNS(t, "tpb")
	require.NoError(t, topo.AddVeth(
		topo.VethEnd{NetNSPath: a.Path(), Name: "to-b", Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.1/24")}},
		topo.VethEnd{NetNSPath: b.Path(), Name: "to-a", Addrs: []netip.Prefix{netip.MustParsePrefix("10.99.0.2/24")}}))
	dst := netip.MustParseAddrPort("10.99.0.2:5000")
	startEchoIn(t, b.Path(), dst)
	direct, err := traffic.Throughput(ctx, a.Path(), netip.Addr{}, dst, throughputTime)
	require.NoError(t, err)
	t.Logf("FIGURE: TCP throughput (echoed, one connection): ext -> LB -> target, replies via the proxy %.0f MB/s; direct veth %.0f MB/s; ratio %.2f",
		lab/1e6, direct/1e6, lab/direct)
}
