package proxy

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/setdiff"
)

// SetVIPs sets the VIPs whose traffic from the targets is routed to the load
// balancers: the dataplane keeps one rule per VIP (and flushes the
// conntrack entries of the VIPs it removes). Invalid entries (not a prefix,
// a default route, overlapping the node subnet of the bridge, or refused by
// Config.VIPs: overlapping a network of the cluster or the node, or a
// reserved one, or wider than the bound) are
// rejected with a logged reason and do not stop the valid ones; the
// returned error lists them. It costs O(V log V) in the number of VIPs, and
// one comparison when the list is the one set last.
func (p *Proxy) SetVIPs(vips []netip.Prefix) error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	var changed bool
	var errs []error
	if slices.Equal(vips, p.vipWanted) {
		errs = p.vipRejected // same list, same bridge: same answer
		p.reportRejectedLocked(errs)
	} else {
		p.vipWanted = slices.Clone(vips)
		changed, errs = p.revalidateVIPsLocked()
	}
	p.mu.Unlock()
	if changed {
		p.markDirty()
	}
	if len(errs) > 0 {
		return fmt.Errorf("set VIPs: %w", errors.Join(errs...))
	}
	return nil
}

// VIPs returns the VIPs in force (the accepted ones, sorted).
func (p *Proxy) VIPs() []netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.vips)
}

// revalidateVIPsLocked recomputes the accepted VIPs from the wanted ones and
// the current bridge prefixes (on a new list or a new bridge address), in
// O(V log V). p.mu must be held. It reports whether the accepted set
// changed, and returns one error per rejected entry.
func (p *Proxy) revalidateVIPsLocked() (bool, []error) {
	bridge := p.bridgePrefixesLocked()
	accepted := make([]netip.Prefix, 0, len(p.vipWanted))
	var errs []error
	for _, v := range p.vipWanted {
		if err := validateVIP(v, bridge, p.cfg.VIPs); err != nil {
			errs = append(errs, err)
			continue
		}
		if !p.servesFamilyOf(v.Addr()) {
			// A trench's VIPs may be of both families while this
			// conduit serves one: not an error, and no rule.
			p.log.Debug("VIP of a family the proxy does not serve ignored", "vip", v)
			continue
		}
		accepted = append(accepted, v.Masked())
	}
	slices.SortFunc(accepted, netip.Prefix.Compare)
	accepted = slices.Compact(accepted)
	p.vipRejected = errs
	p.reportRejectedLocked(errs)
	if slices.Equal(accepted, p.vips) {
		return false, errs
	}
	added, removed := setdiff.Sorted(accepted, p.vips, netip.Prefix.Compare)
	for _, v := range added {
		p.log.Info("VIP added", "vip", v)
	}
	for _, v := range removed {
		p.log.Info("VIP removed", "vip", v)
	}
	p.vips = accepted
	return true, errs
}

// reportRejectedLocked logs and counts the rejected VIP entries.
func (p *Proxy) reportRejectedLocked(errs []error) {
	for _, err := range errs {
		p.log.Warn("VIP rejected", "error", err)
	}
	p.counters.vipRejected += uint64(len(errs))
}

// servesFamilyOf reports whether the proxy serves the family of a.
func (p *Proxy) servesFamilyOf(a netip.Addr) bool {
	want := ipamv1.IPFamily_IPV4
	if a.Unmap().Is6() {
		want = ipamv1.IPFamily_IPV6
	}
	return slices.Contains(p.cfg.Families, want)
}

func validateVIP(v netip.Prefix, bridge []netip.Prefix, policy VIPPolicy) error {
	if !v.IsValid() {
		return fmt.Errorf("VIP %v: not a valid prefix", v)
	}
	if v.Bits() == 0 {
		return fmt.Errorf("VIP %v: a default route is not a VIP", v)
	}
	for _, b := range bridge {
		if b.Masked().Overlaps(v) {
			return fmt.Errorf("VIP %v: overlaps the conduit's node subnet %v", v, b.Masked())
		}
	}
	return policy.check(netip.PrefixFrom(v.Addr().Unmap(), v.Bits()).Masked())
}
