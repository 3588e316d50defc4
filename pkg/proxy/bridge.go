package proxy

import (
	"context"
	"fmt"
	"net/netip"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/backoff"
)

// bridgeChild is the IPAM child name of the bridge address.
const bridgeChild = "bridge"

// allocateBridge allocates the bridge address of every family, in family
// order, retrying until all are there or ctx is done. A family that already
// has its address is not asked again, so a partial failure never duplicates
// an address.
// Each try is bounded by the IPAM timeout, so that a failing IPAM is seen
// (its first failure is a warning, later ones debug lines) rather than
// waited for in silence until ctx ends.
func (p *Proxy) allocateBridge(ctx context.Context) error {
	for failed := 0; ; failed++ {
		lastErr := p.allocateMissingBridge(ctx)
		switch {
		case lastErr == nil && failed > 0:
			p.log.Info("bridge addresses allocated after failed tries", "failedTries", failed)
			return nil
		case lastErr == nil:
			return nil
		case ctx.Err() != nil:
		case failed == 0:
			p.log.Warn("bridge address allocation failed; retrying until the IPAM answers", "error", lastErr,
				"every", p.cfg.RetryInterval.String(), "tryTimeout", p.cfg.IPAMTimeout.String())
		default:
			p.log.Debug("bridge address allocation failed again", "error", lastErr, "failedTries", failed+1)
		}
		if !backoff.Sleep(ctx, p.cfg.RetryInterval) {
			return fmt.Errorf("allocate bridge addresses: %w (last error: %v)", ctx.Err(), lastErr)
		}
	}
}

// allocateMissingBridge asks the IPAM for the bridge address of each family
// that has none yet, in order, and stops at the first failure.
func (p *Proxy) allocateMissingBridge(ctx context.Context) error {
	for _, f := range p.cfg.Families {
		p.mu.Lock()
		_, ok := p.bridge[f]
		p.mu.Unlock()
		if ok {
			continue
		}
		actx, cancel := context.WithTimeout(ctx, p.cfg.IPAMTimeout)
		_, err := p.renewBridgeFamily(actx, f)
		cancel()
		if err != nil {
			return err
		}
	}
	return nil
}

// RenewBridge re-allocates the bridge address of every family now (the
// periodic renewal does the same). If the IPAM answers a different address,
// the bridge, the gateways handed to targets and the dataplane follow.
func (p *Proxy) RenewBridge(ctx context.Context) error {
	var errs []error
	for _, f := range p.cfg.Families {
		actx, cancel := context.WithTimeout(ctx, p.cfg.IPAMTimeout)
		_, err := p.renewBridgeFamily(actx, f)
		cancel()
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("renew bridge addresses: %v", errs)
	}
	return nil
}

// renewBridgeFamily allocates the bridge child of family f and records the
// answer; it reports whether the address changed.
func (p *Proxy) renewBridgeFamily(ctx context.Context, f ipamv1.IPFamily) (bool, error) {
	pfx, err := p.allocate(ctx, f, bridgeChild)
	if err != nil {
		return false, err
	}
	p.mu.Lock()
	old, had := p.bridge[f]
	changed := old != pfx
	if changed {
		p.bridge[f] = pfx
		if had {
			p.counters.bridgeChanges++
		}
		p.revalidateVIPsLocked()
	}
	p.mu.Unlock()
	if changed {
		if had {
			p.log.Warn("bridge address changed by the IPAM", "family", f.String(), "old", old, "new", pfx)
		} else {
			p.log.Info("bridge address allocated", "family", f.String(), "address", pfx)
		}
		p.markDirty()
	}
	return changed, nil
}

// renewLoop renews the bridge allocation every BridgeRenewInterval.
func (p *Proxy) renewLoop(ctx context.Context) {
	defer p.bgWG.Done()
	for {
		t := p.cfg.Clock.NewTimer(p.cfg.BridgeRenewInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		if err := p.RenewBridge(ctx); err != nil {
			p.log.Warn("bridge address renewal failed", "error", err)
		} else {
			p.log.Debug("bridge address renewed", "bridge", p.BridgeAddrs())
		}
	}
}

// BridgeAddrs returns the bridge addresses (the targets' gateways, with
// the node prefix length) in family order.
func (p *Proxy) BridgeAddrs() []netip.Prefix {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.bridgePrefixesLocked()
}

func (p *Proxy) bridgePrefixesLocked() []netip.Prefix {
	var out []netip.Prefix
	for _, f := range p.cfg.Families {
		if b, ok := p.bridge[f]; ok {
			out = append(out, b)
		}
	}
	return out
}

// allocate asks the IPAM for the named child of family f and parses the
// answer into address/node-prefix-length.
func (p *Proxy) allocate(ctx context.Context, f ipamv1.IPFamily, name string) (netip.Prefix, error) {
	resp, err := p.cfg.IPAM.Allocate(ctx, &ipamv1.Child{Name: name, Subnet: p.subnets[f]})
	if err != nil {
		p.countIPAMError()
		return netip.Prefix{}, fmt.Errorf("allocate %s %q: %w", f, name, err)
	}
	pfx, err := parseAllocation(f, resp)
	if err != nil {
		p.countIPAMError()
		return netip.Prefix{}, fmt.Errorf("allocate %s %q: %w", f, name, err)
	}
	return pfx, nil
}

// release asks the IPAM to free the named child of family f.
func (p *Proxy) release(ctx context.Context, f ipamv1.IPFamily, name string) error {
	if _, err := p.cfg.IPAM.Release(ctx, &ipamv1.Child{Name: name, Subnet: p.subnets[f]}); err != nil {
		p.countIPAMError()
		return fmt.Errorf("release %s %q: %w", f, name, err)
	}
	return nil
}

func (p *Proxy) countIPAMError() {
	p.mu.Lock()
	p.counters.ipamErrors++
	p.mu.Unlock()
}

func parseAllocation(f ipamv1.IPFamily, resp *ipamv1.Prefix) (netip.Prefix, error) {
	a, err := netip.ParseAddr(resp.GetAddress())
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address in IPAM answer: %w", err)
	}
	a = a.Unmap()
	if a.Is4() != (f == ipamv1.IPFamily_IPV4) {
		return netip.Prefix{}, fmt.Errorf("IPAM answered %s for family %s", a, f)
	}
	pfx := netip.PrefixFrom(a, int(resp.GetPrefixLength()))
	if !pfx.IsValid() || pfx.Bits() == 0 {
		return netip.Prefix{}, fmt.Errorf("bad prefix length %d in IPAM answer", resp.GetPrefixLength())
	}
	return pfx, nil
}
