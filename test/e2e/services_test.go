package e2e_test

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// TestServices is the service load balancer on the lab, with each
// provider: a target uses the lab's services (over IPv4 and IPv6, TCP and
// UDP; their endpoints are the targets connected to the proxy) while a
// target leaves and another joins. The endpoints follow the targets, the
// flows of the remaining targets go on, the new target gets its share, and
// ClientIP affinity holds afterwards.
func TestServices(t *testing.T) {
	for _, provider := range []string{servicelb.ProviderNftables, servicelb.ProviderUserspace} {
		t.Run(provider, func(t *testing.T) { testServices(t, provider) })
	}
}

func testServices(t *testing.T, provider string) {
	l := newLab(t, func(o *labrun.Options) { o.ServiceProvider = provider })
	// newLab waited for green checks, the lab's service checks included.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	targets := l.Targets()
	require.Len(t, targets, 3)
	client, leaving, joining := targets[0], targets[2], "target-4"

	probers := map[string]*traffic.Prober{}
	for _, s := range l.Services() {
		if s.Sticky {
			continue
		}
		for _, network := range []string{"tcp", "udp"} {
			p, err := traffic.StartProber(ctx, traffic.ProbeConfig{NetNSPath: l.NetNSPath(client), Network: network,
				Addr: s.Addr(), Interval: 20 * time.Millisecond, Timeout: 500 * time.Millisecond})
			require.NoError(t, err)
			t.Cleanup(func() { p.Stop() })
			probers[fmt.Sprintf("%s %s", network, s.Addr())] = p
		}
	}
	seenBy := func(p *traffic.Prober, since time.Time, names ...string) bool {
		got := p.Series().After(since).Targets()
		for _, n := range names {
			if got[n] == 0 {
				return false
			}
		}
		return true
	}
	begin := time.Now()
	for name, p := range probers {
		require.Eventually(t, func() bool { return seenBy(p, begin, targets...) }, waitLong, poll, "%s spread over %v", name, targets)
	}

	// A target leaves: its endpoints go, the others keep serving.
	leftAddrs := addrsOfTarget(l, leaving)
	stopped := time.Now()
	require.NoError(t, l.StopTarget(leaving))
	require.Eventually(t, func() bool {
		eps, err := serviceEndpoints(ctx, l)
		return err == nil && !slices.ContainsFunc(eps, func(a netip.AddrPort) bool { return slices.Contains(leftAddrs, a.Addr()) })
	}, waitLong, poll, "the proxy drops %s's endpoints %v", leaving, leftAddrs)
	gone := time.Now()
	t.Logf("FIGURE: %s: endpoints of a leaving target gone from the proxy %v after it stopped", provider, gone.Sub(stopped).Round(time.Millisecond))
	settle := gone.Add(time.Second)
	time.Sleep(2 * time.Second)
	for name, p := range probers {
		during := p.Series().After(stopped).Before(gone)
		after := p.Series().After(settle)
		t.Logf("FIGURE: %s: %s from %s while %s left: %d of %d flows failed until its endpoints went, %d of %d after",
			provider, name, client, leaving, during.Failures(), len(during), after.Failures(), len(after))
		requireNoCut(t, after, "%s: flows fail once the endpoints are updated: %v", name, after.FirstError())
		require.Zero(t, after.Targets()[leaving], "%s: flows still reach %s", name, leaving)
	}

	// A target joins: it gets its share.
	joined := time.Now()
	require.NoError(t, l.StartTarget(joining))
	for name, p := range probers {
		require.Eventually(t, func() bool { return seenBy(p, joined, joining) }, waitLong, poll, "%s reaches %s", name, joining)
		var first time.Time
		for _, pr := range p.Series().After(joined) {
			if pr.Target == joining {
				first = pr.Start
				break
			}
		}
		t.Logf("FIGURE: %s: %s from %s reaches the joining %s %v after it started", provider, name, client, joining,
			first.Sub(joined).Round(time.Millisecond))
	}
	served := time.Now()
	time.Sleep(2 * time.Second)
	now := []string{client, targets[1], joining}
	for name, p := range probers {
		s := p.Series().After(served)
		requireNoCut(t, s, "%s after the join: %v", name, s.FirstError())
		require.True(t, seenBy(p, served, now...), "%s spread over %v: %v", name, now, s.Targets())
		all := p.Stop()
		t.Logf("FIGURE: %s: %s from %s over the whole scenario: %d of %d flows failed, longest gap %v", provider, name, client,
			all.Failures(), len(all), all.LongestGap().Len().Round(time.Millisecond))
	}

	// ClientIP affinity holds on the sticky services, from every target.
	for _, s := range l.Services() {
		if !s.Sticky {
			continue
		}
		for _, network := range []string{"tcp", "udp"} {
			for _, from := range now {
				answers := map[string]int{}
				for range 6 {
					name, err := l.ServiceProbe(from, network, s.Addr())
					require.NoError(t, err, "%s %s from %s", network, s.Addr(), from)
					answers[name]++
				}
				require.Len(t, answers, 1, "%s %s from %s sticks to one target: %v", network, s.Addr(), from, answers)
			}
		}
	}
}

// addrsOfTarget are the addresses the proxy handed out to a target.
func addrsOfTarget(l *labrun.Lab, name string) []netip.Addr {
	var out []netip.Addr
	for _, p := range l.TargetAddrs(name) {
		out = append(out, p.Addr())
	}
	return out
}

// serviceEndpoints are the endpoints of every service port in the proxy's
// -debug state.
func serviceEndpoints(ctx context.Context, l *labrun.Lab) ([]netip.AddrPort, error) {
	st, err := proxyState(ctx, l)
	if err != nil {
		return nil, err
	}
	if st.Services == nil {
		return nil, fmt.Errorf("the proxy serves no services")
	}
	var out []netip.AddrPort
	for _, p := range st.Services.Ports {
		out = append(out, p.Endpoints...)
	}
	return out, nil
}
