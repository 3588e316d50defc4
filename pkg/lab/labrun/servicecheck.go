package labrun

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// serviceFlowsPerTarget is how many flows the balance check opens per
// endpoint (sequential, so that a round robin gives each the same share).
const serviceFlowsPerTarget = 3

// stickyFlows is how many flows each target opens to a sticky service.
const stickyFlows = 6

// checkServices: a target reaches each service IP over TCP and UDP, spread
// evenly over every target (itself included: its own flows come back to
// it through the proxy), and with ClientIP affinity each target's flows
// all go to one target.
func (l *Lab) checkServices(ctx context.Context, r *Report, targets []string) {
	svcs := l.Services()
	if len(svcs) == 0 || len(targets) == 0 {
		return
	}
	client := targets[0]
	for _, s := range svcs {
		for _, network := range []string{"tcp", "udp"} {
			if ctx.Err() != nil {
				return
			}
			if !s.Sticky {
				res := l.serviceFlows(ctx, client, network, s.Addr(), serviceFlowsPerTarget*len(targets))
				ok, detail := balanced(res, targets)
				r.add(fmt.Sprintf("%s -> service %s %s %s balanced over the targets", client, s.Name, strings.ToUpper(network), s.Addr()),
					ok, "%s", detail)
				continue
			}
			var parts []string
			ok := true
			for _, t := range targets {
				res := l.serviceFlows(ctx, t, network, s.Addr(), stickyFlows)
				if res.failed > 0 || len(res.answers) != 1 {
					ok = false
				}
				parts = append(parts, fmt.Sprintf("%s: %s", t, res))
			}
			r.add(fmt.Sprintf("service %s %s %s keeps ClientIP affinity", s.Name, strings.ToUpper(network), s.Addr()),
				ok, "each target's flows to one target: %s", strings.Join(parts, "; "))
		}
	}
}

// serviceFlows opens up to n flows one after the other from the target's
// namespace to addr, each a new flow for the proxy's conntrack (a UDP flow
// from the port of an earlier one would follow that flow's decision, not
// the round robin; a TCP connection from a closed one's port starts a new
// entry anyway). It stops at the first failure, which fails the check
// anyway: a service that is not served would otherwise cost every flow its
// probe timeout (minutes for the lab's checks), and at the end of ctx.
func (l *Lab) serviceFlows(ctx context.Context, target, network string, addr netip.AddrPort, n int) flowResult {
	res := flowResult{answers: map[string]int{}}
	for range n {
		if ctx.Err() != nil {
			break
		}
		var name string
		var err error
		if network == "udp" {
			name, err = traffic.AskUDPNew(ctx, l.NetNSPath(target), addr, probeTimeout, l.udpTracked(addr))
		} else {
			name, err = probe(l.NetNSPath(target), network, netip.Addr{}, addr)
		}
		if err != nil {
			res.failed++
			res.firstErr = err
			break
		}
		res.answers[name]++
	}
	return res
}

// balanced: every flow answered, by every target, shares at most one apart.
func balanced(res flowResult, targets []string) (bool, string) {
	lo, hi := -1, 0
	var missing []string
	for _, t := range targets {
		n := res.answers[t]
		if n == 0 {
			missing = append(missing, t)
		}
		if lo < 0 || n < lo {
			lo = n
		}
		hi = max(hi, n)
	}
	detail := res.String()
	if len(missing) > 0 {
		detail += fmt.Sprintf("; no flow to %v", missing)
	}
	return res.failed == 0 && len(missing) == 0 && hi-lo <= 1, detail
}

// ServiceProbe opens one flow from the target's namespace to addr over
// network ("tcp" or "udp") and returns the name of the target that
// answered.
func (l *Lab) ServiceProbe(target, network string, addr netip.AddrPort) (string, error) {
	return probe(l.NetNSPath(target), network, netip.Addr{}, addr)
}
