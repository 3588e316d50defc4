package userspace

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

// redirect is one kernel rule: traffic to svc over proto goes to the local
// socket port.
type redirect struct {
	svc   netip.AddrPort
	proto servicelb.Protocol
	port  uint16
}

func (r redirect) compare(o redirect) int {
	if c := r.svc.Compare(o.svc); c != 0 {
		return c
	}
	if c := cmp.Compare(r.proto, o.proto); c != 0 {
		return c
	}
	return cmp.Compare(r.port, o.port)
}

const servicesChain = "services"

// firstPackets matches the first packet of a connection (conntrack state
// new or related): every packet that the kernel passes through a NAT chain.
// The match changes nothing there; it is there because a ct expression
// keeps connection tracking on in the namespace. Without one, removing the
// last redirect rule switched tracking off, and the packets of connections
// that removed service ports still relay were no longer translated to their
// socket (the kernel found no route to the service IP).
func firstPackets() []expr.Any {
	return []expr.Any{
		&expr.Ct{Register: 1, Key: expr.CtKeySTATE},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: binary.NativeEndian.AppendUint32(nil, expr.CtStateBitNEW|expr.CtStateBitRELATED), Xor: make([]byte, 4)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: make([]byte, 4)},
	}
}

// writeRules replaces the table's rules with rules in one transaction: the
// table and its two base chains (routed traffic at prerouting, local traffic
// at output) jump to one chain with a rule per service port. With a
// specific listen IP the rule DNATs to it, otherwise it redirects (to the
// incoming interface's primary address, or loopback for local traffic).
func (p *Proxier) writeRules(rules []redirect) error {
	c, err := kernel.NFT(p.opts.NetNS)
	if err != nil {
		return err
	}
	t := c.AddTable(kernel.Table(TableName))
	svc := c.AddChain(&nftables.Chain{Name: servicesChain, Table: t})
	for _, hook := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeNAT,
			Hooknum: hook.hook, Priority: nftables.ChainPriorityNATDest})
		c.FlushChain(ch)
		c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: append(firstPackets(), kernel.Jump(servicesChain))})
	}
	c.FlushChain(svc)
	specific := !p.listenIP.IsUnspecified()
	for _, r := range rules {
		exprs := kernel.MatchService(r.svc, r.proto)
		if specific {
			exprs = append(exprs, kernel.DNAT(netip.AddrPortFrom(p.listenIP, r.port))...)
		} else {
			exprs = append(exprs, kernel.Redirect(r.port)...)
		}
		c.AddRule(&nftables.Rule{Table: t, Chain: svc, Exprs: exprs})
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("write %d redirect rules: %w", len(rules), err)
	}
	return nil
}
