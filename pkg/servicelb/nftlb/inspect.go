package nftlb

import (
	"slices"
	"strings"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

var _ servicelb.Inspector = (*Provider)(nil)

// PortStates lists the service ports in the kernel: endpoints, chain, and
// the new flows counted by the port's dispatch rule.
func (p *Provider) PortStates() []servicelb.PortState {
	p.syncMu.Lock()
	defer p.syncMu.Unlock()
	if p.applied == nil {
		return nil
	}
	counters, err := p.countersLocked()
	out := make([]servicelb.PortState, 0, len(p.applied.ports))
	for name, ps := range p.applied.ports {
		st := servicelb.NewPortState(ps.info, slices.Clone(ps.eps))
		st.Chain = svcChainName(name, ps.info)
		st.NewFlows, st.NewFlowSize = -1, -1
		if c, ok := counters[st.Chain]; ok && err == nil {
			st.NewFlows, st.NewFlowSize = int64(c.Packets), int64(c.Bytes)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b servicelb.PortState) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// countersLocked reads the counters of the dispatch rules, by the service
// chain they go to.
func (p *Provider) countersLocked() (map[string]*expr.Counter, error) {
	c, err := kernel.NFT(p.opts.NetNS)
	if err != nil {
		return nil, err
	}
	t := kernel.Table(TableName)
	out := make(map[string]*expr.Counter)
	for _, ic := range p.applied.dispatch {
		rules, err := c.GetRules(t, &nftables.Chain{Name: ic.name, Table: t})
		if err != nil {
			return nil, err
		}
		for _, r := range rules {
			var counter *expr.Counter
			var target string
			for _, e := range r.Exprs {
				switch v := e.(type) {
				case *expr.Counter:
					counter = v
				case *expr.Verdict:
					target = v.Chain
				}
			}
			if counter != nil && target != "" {
				out[target] = counter
			}
		}
	}
	return out, nil
}
