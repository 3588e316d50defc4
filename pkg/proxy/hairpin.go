package proxy

// SetTargetHairpin turns the hairpin mode of the targets' bridge ports on
// or off (through the dataplane state, like the ports themselves): the
// service load balancer's nftables provider needs it while it has
// services, since a target may be the endpoint of its own request, whose
// reply then leaves the bridge by the port it came in.
func (p *Proxy) SetTargetHairpin(on bool) {
	p.mu.Lock()
	changed := p.portsHops.hairpin != on
	if changed {
		p.portsHops.setHairpin(on, p.targetLinksLocked())
	}
	p.mu.Unlock()
	if changed {
		p.markDirty()
	}
}

// targetLinksLocked are the links of the target connections. p.mu must be
// held.
func (p *Proxy) targetLinksLocked() []int {
	var out []int
	for _, st := range p.conns {
		if st.typ == TargetConn && st.link != 0 {
			out = append(out, st.link)
		}
	}
	return out
}
