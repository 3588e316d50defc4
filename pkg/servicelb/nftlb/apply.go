package nftlb

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

// Fixed objects of the table.
const (
	dispatch4 = "dispatch4" // ipv4_addr : verdict (goto the IP's chain)
	dispatch6 = "dispatch6"
)

// tx is one transaction being built; n counts the objects it sends.
type tx struct {
	c    *nftables.Conn
	t    *nftables.Table
	n    int
	sets map[string]*nftables.Set // sets created in this transaction
	err  error
}

func (x *tx) chain(name string) *nftables.Chain { return &nftables.Chain{Name: name, Table: x.t} }

func (x *tx) rule(chain string, exprs ...expr.Any) {
	x.c.AddRule(&nftables.Rule{Table: x.t, Chain: x.chain(chain), Exprs: exprs})
	x.n++
}

func (x *tx) addSet(s *nftables.Set, elems []nftables.SetElement) {
	s.Table = x.t
	if err := x.c.AddSet(s, elems); err != nil && x.err == nil {
		x.err = fmt.Errorf("set %s: %w", s.Name, err)
	}
	x.n += 1 + len(elems)
	if !s.Anonymous {
		x.sets[s.Name] = s
	}
}

// set returns the set named name: the one created in this transaction, or
// a reference to one in the kernel.
func (x *tx) set(name string) *nftables.Set {
	if s, ok := x.sets[name]; ok {
		return s
	}
	return &nftables.Set{Table: x.t, Name: name}
}

func dispatchSet(v6 bool) *nftables.Set {
	s := &nftables.Set{Name: dispatch4, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict, IsMap: true}
	if v6 {
		s.Name, s.KeyType = dispatch6, nftables.TypeIP6Addr
	}
	return s
}

var (
	any4 = netip.IPv4Unspecified()
	any6 = netip.IPv6Unspecified()
)

func family(v6 bool) netip.Addr {
	if v6 {
		return any6
	}
	return any4
}

// base creates the table, the dispatch maps and the NAT base chains that
// look every new flow's destination up in them (prerouting for routed
// traffic, output for the namespace's own).
func (x *tx) base() {
	x.c.AddTable(x.t)
	x.n++
	for _, v6 := range []bool{false, true} {
		x.addSet(dispatchSet(v6), nil)
	}
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		x.c.AddChain(&nftables.Chain{Name: h.name, Table: x.t, Type: nftables.ChainTypeNAT,
			Hooknum: h.hook, Priority: nftables.ChainPriorityNATDest})
		x.n++
		for _, v6 := range []bool{false, true} {
			s := x.set(dispatchSet(v6).Name)
			exprs := append(kernel.MatchFamily(family(v6)), kernel.LoadDaddr(family(v6), 1),
				&expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID, IsDestRegSet: true, DestRegister: 0})
			x.rule(h.name, exprs...)
		}
	}
}

// apply sends the difference between p.applied and want in one transaction
// and returns how many objects it sent.
func (p *Provider) apply(want *state) (int, error) {
	old := p.applied
	x := &tx{t: kernel.Table(TableName), sets: make(map[string]*nftables.Set)}
	if old == nil {
		old = newState()
	}
	var sendSize int
	c, err := p.conn(&sendSize)
	if err != nil {
		return 0, err
	}
	x.c = c
	if p.applied == nil {
		x.base()
	}
	p.diffAffinity(x, old, want)
	p.diffChains(x, old, want)
	p.diffDispatch(x, old, want)
	p.deletions(x, old, want)
	if x.err != nil {
		return x.n, x.err
	}
	if x.n == 0 {
		return 0, nil
	}
	sendSize = x.n
	if err := c.Flush(); err != nil {
		return x.n, fmt.Errorf("nftables transaction of %d objects: %w", x.n, err)
	}
	return x.n, nil
}

// conn returns a connection whose socket buffers are sized, when it dials
// at Flush, for *objects messages and their acknowledgements: a large
// transaction must not lose its acks.
func (p *Provider) conn(objects *int) (*nftables.Conn, error) {
	opt := nftables.WithSockOptions(func(nc *netlink.Conn) error {
		if err := nc.SetOption(netlink.CapAcknowledge, true); err != nil {
			return fmt.Errorf("netlink cap ack: %w", err)
		}
		size := 4<<20 + *objects*2048
		raw, err := nc.SyscallConn()
		if err != nil {
			return err
		}
		var serr error
		if err := raw.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, size)
			if serr == nil {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUFFORCE, size)
			}
		}); err != nil {
			return err
		}
		return serr
	})
	c, err := nftables.New(append(nsOpt(p), opt)...)
	if err != nil {
		return nil, fmt.Errorf("nftables connection: %w", err)
	}
	return c, nil
}

func nsOpt(p *Provider) []nftables.ConnOption {
	if kernel.Current(p.opts.NetNS) {
		return nil
	}
	return []nftables.ConnOption{nftables.WithNetNSFd(int(p.opts.NetNS))}
}

func (p *Provider) diffAffinity(x *tx, old, want *state) {
	for name, s := range want.affinity {
		if _, ok := old.affinity[name]; ok {
			continue
		}
		kt := nftables.TypeIPAddr
		if s.v6 {
			kt = nftables.TypeIP6Addr
		}
		x.addSet(&nftables.Set{Name: name, KeyType: kt, HasTimeout: true, Dynamic: true, Timeout: s.timeout}, nil)
	}
}

// diffChains creates the new chains first (so every goto finds its target),
// then writes the rules of new and changed chains.
func (p *Provider) diffChains(x *tx, old, want *state) {
	addChain := func(name string) {
		x.c.AddChain(x.chain(name))
		x.n++
	}
	rewrite := func(name string, exists bool) {
		if exists {
			x.c.FlushChain(x.chain(name))
			x.n++
		}
	}
	for name := range want.eps {
		if _, ok := old.eps[name]; !ok {
			addChain(name)
		}
	}
	for name := range want.services {
		if _, ok := old.services[name]; !ok {
			addChain(name)
		}
	}
	for ip, ic := range want.dispatch {
		if oc, ok := old.dispatch[ip]; !ok || oc.name != ic.name {
			addChain(ic.name)
		}
	}
	for name, ec := range want.eps {
		oc, ok := old.eps[name]
		if ok && oc == ec {
			continue
		}
		rewrite(name, ok)
		x.epRule(name, ec)
	}
	for name, sc := range want.services {
		oc, ok := old.services[name]
		if ok && oc.equal(sc) {
			continue
		}
		rewrite(name, ok)
		x.svcRules(name, sc)
	}
	for ip, ic := range want.dispatch {
		oc, ok := old.dispatch[ip]
		if ok && oc.name == ic.name && slices.Equal(oc.ports, ic.ports) {
			continue
		}
		rewrite(ic.name, ok && oc.name == ic.name)
		for _, r := range ic.ports {
			x.rule(ic.name, append(kernel.MatchPort(r.port, r.proto), kernel.Goto(r.chain))...)
		}
	}
}

// epRule: remember the client in the endpoint's affinity set (adding it or
// refreshing its timeout), then DNAT to the endpoint.
func (x *tx) epRule(name string, ec epChain) {
	var exprs []expr.Any
	if ec.affinity != "" {
		s := x.set(ec.affinity)
		exprs = append(exprs, kernel.LoadSaddr(ec.to.Addr(), 1),
			&expr.Dynset{SrcRegKey: 1, SetName: s.Name, SetID: s.ID, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: ec.timeout})
	}
	x.rule(name, append(exprs, kernel.DNAT(ec.to)...)...)
}

// svcRules: a client found in an endpoint's affinity set goes there; any
// other takes the next endpoint of an incrementing counter.
func (x *tx) svcRules(name string, sc svcChain) {
	fam := family(sc.v6)
	for i, aff := range sc.affinity {
		s := x.set(aff)
		x.rule(name, kernel.LoadSaddr(fam, 1), &expr.Lookup{SourceRegister: 1, SetName: s.Name, SetID: s.ID},
			kernel.Goto(sc.eps[i]))
	}
	switch len(sc.eps) {
	case 0:
		return
	case 1:
		x.rule(name, kernel.Goto(sc.eps[0]))
		return
	}
	// Keys are in host order, as numgen writes its register (nft lists
	// them as if big-endian: 1 shows as 16777216 on x86).
	vmap := &nftables.Set{Anonymous: true, Constant: true, IsMap: true, KeyType: nftables.TypeInteger, DataType: nftables.TypeVerdict}
	elems := make([]nftables.SetElement, len(sc.eps))
	for i, ep := range sc.eps {
		elems[i] = nftables.SetElement{Key: binaryutil.NativeEndian.PutUint32(uint32(i)), VerdictData: kernel.Goto(ep)}
	}
	x.addSet(vmap, elems)
	x.rule(name,
		&expr.Numgen{Register: 1, Modulus: uint32(len(sc.eps)), Type: unix.NFT_NG_INCREMENTAL},
		&expr.Lookup{SourceRegister: 1, SetName: vmap.Name, SetID: vmap.ID, IsDestRegSet: true, DestRegister: 0})
}

// diffDispatch points the dispatch maps at the IP chains of new service
// IPs and drops the elements of removed ones.
func (p *Provider) diffDispatch(x *tx, old, want *state) {
	add := map[bool][]nftables.SetElement{}
	del := map[bool][]nftables.SetElement{}
	for ip, ic := range want.dispatch {
		if oc, ok := old.dispatch[ip]; ok && oc.name == ic.name {
			continue
		} else if ok {
			del[!ip.Is4()] = append(del[!ip.Is4()], nftables.SetElement{Key: ip.AsSlice()})
		}
		add[!ip.Is4()] = append(add[!ip.Is4()], nftables.SetElement{Key: ip.AsSlice(), VerdictData: kernel.Goto(ic.name)})
	}
	for ip := range old.dispatch {
		if _, ok := want.dispatch[ip]; !ok {
			del[!ip.Is4()] = append(del[!ip.Is4()], nftables.SetElement{Key: ip.AsSlice()})
		}
	}
	for _, v6 := range []bool{false, true} {
		s := x.set(dispatchSet(v6).Name)
		s.KeyType, s.DataType, s.IsMap = dispatchSet(v6).KeyType, nftables.TypeVerdict, true
		if len(del[v6]) > 0 {
			if err := x.c.SetDeleteElements(s, del[v6]); err != nil && x.err == nil {
				x.err = err
			}
			x.n += len(del[v6])
		}
		if len(add[v6]) > 0 {
			if err := x.c.SetAddElements(s, add[v6]); err != nil && x.err == nil {
				x.err = err
			}
			x.n += len(add[v6])
		}
	}
}

// deletions removes what want no longer has, referrers first.
func (p *Provider) deletions(x *tx, old, want *state) {
	del := func(name string) {
		x.c.DelChain(x.chain(name))
		x.n++
	}
	for ip, oc := range old.dispatch {
		if nc, ok := want.dispatch[ip]; !ok || nc.name != oc.name {
			del(oc.name)
		}
	}
	for name := range old.services {
		if _, ok := want.services[name]; !ok {
			del(name)
		}
	}
	for name := range old.eps {
		if _, ok := want.eps[name]; !ok {
			del(name)
		}
	}
	for name := range old.affinity {
		if _, ok := want.affinity[name]; !ok {
			x.c.DelSet(&nftables.Set{Table: x.t, Name: name})
			x.n++
		}
	}
}
