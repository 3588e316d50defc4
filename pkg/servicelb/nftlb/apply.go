package nftlb

import (
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/kernel"
)

// The shared sets of the table.
const (
	dispatch4 = "dispatch4" // ipv4_addr : verdict (goto the IP's chain)
	dispatch6 = "dispatch6"
	rr4       = "roundrobin4" // service id . turn : ipv4_addr . inet_service . endpoint id
	rr6       = "roundrobin6"
	affinity4 = "affinity4" // endpoint id . ipv4_addr, with timeout
	affinity6 = "affinity6"
	hairpin4  = "hairpin4" // ipv4_addr . ipv4_addr: (endpoint, endpoint) for each endpoint address
	hairpin6  = "hairpin6"
)

// 32-bit registers. The round-robin lookup takes its key from regKey on and
// writes the endpoint from regEP on: address, port, then endpoint id (at
// regEP+2 for IPv4, regEP+5 for IPv6), followed by the client address to
// form the affinity key. Per-endpoint affinity rules build their key from
// regAff on.
const (
	regKey = 8
	regEP  = 8
	regAff = 16
)

// affinitySize bounds each affinity set (clients × endpoints with affinity).
const affinitySize = 1 << 20

// elemsPerMessage keeps a message's element list under the 64 KiB that a
// netlink attribute can hold (a goto element takes about 60 bytes).
const elemsPerMessage = 500

// tx is one transaction being built; n counts the objects it sends.
type tx struct {
	c   *nftables.Conn
	t   *nftables.Table
	n   int
	err error
}

func (x *tx) fail(err error) {
	if err != nil && x.err == nil {
		x.err = err
	}
}

func (x *tx) chain(name string) *nftables.Chain { return &nftables.Chain{Name: name, Table: x.t} }

func (x *tx) rule(chain string, exprs ...expr.Any) {
	x.c.AddRule(&nftables.Rule{Table: x.t, Chain: x.chain(chain), Exprs: exprs})
	x.n++
}

func id32(id uint32) []byte { return binaryutil.NativeEndian.PutUint32(id) }

func dispatchSet(v6 bool) *nftables.Set {
	if v6 {
		return &nftables.Set{Name: dispatch6, KeyType: nftables.TypeIP6Addr, DataType: nftables.TypeVerdict, IsMap: true}
	}
	return &nftables.Set{Name: dispatch4, KeyType: nftables.TypeIPAddr, DataType: nftables.TypeVerdict, IsMap: true}
}

func roundRobinSet(v6 bool) *nftables.Set {
	key := nftables.MustConcatSetType(nftables.TypeMark, nftables.TypeMark)
	if v6 {
		return &nftables.Set{Name: rr6, KeyType: key, Concatenation: true, IsMap: true,
			DataType: nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeInetService, nftables.TypeMark)}
	}
	return &nftables.Set{Name: rr4, KeyType: key, Concatenation: true, IsMap: true,
		DataType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeInetService, nftables.TypeMark)}
}

// rrData is an endpoint as the round-robin map holds it.
func rrData(e endpoint) []byte {
	out := append(e.to.Addr().AsSlice(), byte(e.to.Port()>>8), byte(e.to.Port()), 0, 0)
	return append(out, id32(e.id)...)
}

func affinitySet(v6 bool) *nftables.Set {
	s := &nftables.Set{Name: affinity4, KeyType: nftables.MustConcatSetType(nftables.TypeMark, nftables.TypeIPAddr),
		Concatenation: true, HasTimeout: true, Dynamic: true, Size: affinitySize}
	if v6 {
		s.Name, s.KeyType = affinity6, nftables.MustConcatSetType(nftables.TypeMark, nftables.TypeIP6Addr)
	}
	return s
}

func affinityName(v6 bool) string { return affinitySet(v6).Name }

func hairpinSet(v6 bool) *nftables.Set {
	if v6 {
		return &nftables.Set{Name: hairpin6, KeyType: nftables.MustConcatSetType(nftables.TypeIP6Addr, nftables.TypeIP6Addr), Concatenation: true}
	}
	return &nftables.Set{Name: hairpin4, KeyType: nftables.MustConcatSetType(nftables.TypeIPAddr, nftables.TypeIPAddr), Concatenation: true}
}

// hairpinKey is the element of endpoint address a: a . a.
func hairpinKey(a netip.Addr) []byte { return append(a.AsSlice(), a.AsSlice()...) }

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

// base creates the table, its shared sets and the NAT base chains that look
// every new flow's destination up in the dispatch maps (prerouting for
// routed traffic, output for the namespace's own), and the one that
// masquerades a flow that an endpoint sent to a service and that was
// DNATed back to that endpoint itself (postrouting: source = destination =
// an endpoint address): its answer must come back through the proxy, not
// stay inside the endpoint. (On a bridge, such a flow leaves by the port
// it came in: the port needs hairpin mode, see docs/servicelb.md.)
func (x *tx) base() {
	x.c.AddTable(x.t)
	x.n++
	for _, s := range []*nftables.Set{dispatchSet(false), dispatchSet(true), roundRobinSet(false), roundRobinSet(true),
		affinitySet(false), affinitySet(true), hairpinSet(false), hairpinSet(true)} {
		s.Table = x.t
		x.fail(x.c.AddSet(s, nil))
		x.n++
	}
	for _, h := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"prerouting", nftables.ChainHookPrerouting}, {"output", nftables.ChainHookOutput}} {
		x.c.AddChain(&nftables.Chain{Name: h.name, Table: x.t, Type: nftables.ChainTypeNAT,
			Hooknum: h.hook, Priority: nftables.ChainPriorityNATDest})
		x.n++
		for _, v6 := range []bool{false, true} {
			exprs := append(kernel.MatchFamily(family(v6)), kernel.LoadDaddr(family(v6), 1),
				&expr.Lookup{SourceRegister: 1, SetName: dispatchSet(v6).Name, IsDestRegSet: true, DestRegister: 0})
			x.rule(h.name, exprs...)
		}
	}
	x.c.AddChain(&nftables.Chain{Name: "postrouting", Table: x.t, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPostrouting, Priority: nftables.ChainPriorityNATSource})
	x.n++
	for _, v6 := range []bool{false, true} {
		dreg := uint32(9) // after the 4-byte source address in the 32-bit registers
		if v6 {
			dreg = 12
		}
		exprs := append(kernel.MatchFamily(family(v6)), kernel.LoadSaddr(family(v6), 8), kernel.LoadDaddr(family(v6), dreg),
			&expr.Lookup{SourceRegister: 8, SetName: hairpinSet(v6).Name}, &expr.Masq{})
		x.rule("postrouting", exprs...)
	}
}

// diffHairpin updates the hairpin sets from the endpoint addresses in old
// to those in want.
func (x *tx) diffHairpin(old, want map[netip.Addr]bool) {
	for _, v6 := range []bool{false, true} {
		var add, del []nftables.SetElement
		for a := range want {
			if a.Is4() != v6 && !old[a] {
				add = append(add, nftables.SetElement{Key: hairpinKey(a)})
			}
		}
		for a := range old {
			if a.Is4() != v6 && !want[a] {
				del = append(del, nftables.SetElement{Key: hairpinKey(a)})
			}
		}
		x.elements(hairpinSet(v6), add, del)
	}
}

// apply sends the difference from old to want (fragments of the table, or
// the whole of it when nothing is applied yet) in one transaction and
// returns how many objects it sent.
func (p *Provider) apply(old, want *state, hairpin map[netip.Addr]bool) (int, error) {
	var size int
	c, err := p.conn(&size)
	if err != nil {
		return 0, err
	}
	x := &tx{c: c, t: kernel.Table(TableName)}
	oldHairpin := p.hairpin
	if p.applied == nil {
		x.base()
		oldHairpin = nil
	}
	x.diffChains(old, want)
	x.diffElements(old, want)
	x.diffHairpin(oldHairpin, hairpin)
	x.deletions(old, want)
	if x.err != nil {
		return x.n, x.err
	}
	if x.n == 0 {
		return 0, nil
	}
	size = x.n
	built := time.Now()
	if err := c.Flush(); err != nil {
		return x.n, fmt.Errorf("nftables transaction of %d objects: %w", x.n, err)
	}
	p.stats.LastKernel = time.Since(built)
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
	opts := []nftables.ConnOption{opt}
	if !netnsdo.Current(p.opts.NetNS) {
		opts = append(opts, nftables.WithNetNSFd(int(p.opts.NetNS)))
	}
	c, err := nftables.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("nftables connection: %w", err)
	}
	return c, nil
}

// diffChains creates the new chains first (so every goto finds its target),
// then writes the rules of new and changed chains.
func (x *tx) diffChains(old, want *state) {
	var added []string
	for name := range want.services {
		if _, ok := old.services[name]; !ok {
			added = append(added, name)
		}
	}
	for ip, ic := range want.dispatch {
		if oc, ok := old.dispatch[ip]; !ok || oc.name != ic.name {
			added = append(added, ic.name)
		}
	}
	for _, name := range added {
		x.c.AddChain(x.chain(name))
		x.n++
	}
	rewrite := func(name string, exists bool) {
		if exists {
			x.c.FlushChain(x.chain(name))
			x.n++
		}
	}
	for name, sc := range want.services {
		if oc, ok := old.services[name]; !ok || !oc.equal(sc) {
			rewrite(name, ok)
			x.svcRules(name, sc)
		}
	}
	for ip, ic := range want.dispatch {
		oc, ok := old.dispatch[ip]
		if ok && oc.name == ic.name && slices.Equal(oc.ports, ic.ports) {
			continue
		}
		rewrite(ic.name, ok && oc.name == ic.name)
		for _, r := range ic.ports {
			// The counter sees the first packet of each new flow (a NAT
			// chain sees nothing else): the service port's new flows.
			x.rule(ic.name, append(kernel.MatchPort(r.port, r.proto), &expr.Counter{}, kernel.Goto(r.chain))...)
		}
	}
}

// svcRules: with affinity, one rule per endpoint sends a client that has a
// live element (endpoint id, client address) there and refreshes it; then
// every other client takes the service's next turn: an incrementing counter
// (numgen inc) looked up with the service id in the round-robin map, which
// yields the endpoint; with affinity the client gets its element; DNAT.
func (x *tx) svcRules(name string, sc svcChain) {
	fam := family(sc.v6)
	affinity := affinityName(sc.v6)
	remember := func(reg uint32) []expr.Any {
		return []expr.Any{&expr.Dynset{SrcRegKey: reg, SetName: affinity, Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: sc.timeout}}
	}
	if sc.timeout > 0 {
		for _, ep := range sc.eps {
			exprs := []expr.Any{&expr.Immediate{Register: regAff, Data: id32(ep.id)}, kernel.LoadSaddr(fam, regAff+1),
				&expr.Lookup{SourceRegister: regAff, SetName: affinity}}
			exprs = append(exprs, remember(regAff)...)
			x.rule(name, append(exprs, kernel.DNAT(ep.to)...)...)
		}
	}
	if sc.n == 0 {
		return
	}
	addrRegs, idReg := uint32(1), uint32(regEP+2) // the port follows a 4-byte address
	if sc.v6 {
		addrRegs, idReg = 4, regEP+5
	}
	exprs := []expr.Any{
		&expr.Immediate{Register: regKey, Data: id32(sc.id)},
		&expr.Numgen{Register: regKey + 1, Modulus: uint32(sc.n), Type: unix.NFT_NG_INCREMENTAL},
		&expr.Lookup{SourceRegister: regKey, SetName: roundRobinSet(sc.v6).Name, IsDestRegSet: true, DestRegister: regEP},
	}
	if sc.timeout > 0 {
		exprs = append(exprs, kernel.LoadSaddr(fam, idReg+1))
		exprs = append(exprs, remember(idReg)...)
	}
	exprs = append(exprs, &expr.NAT{Type: expr.NATTypeDestNAT, Family: kernel.NFProto(fam),
		RegAddrMin: regEP, RegProtoMin: regEP + addrRegs, Specified: true})
	x.rule(name, exprs...)
}

// diffElements updates the dispatch and round-robin maps: new keys are
// added, changed ones deleted and added again, gone ones deleted.
func (x *tx) diffElements(old, want *state) {
	for _, v6 := range []bool{false, true} {
		var add, del []nftables.SetElement
		for ip, ic := range want.dispatch {
			if ip.Is4() == v6 {
				continue
			}
			oc, ok := old.dispatch[ip]
			if ok && oc.name == ic.name {
				continue
			}
			if ok {
				del = append(del, nftables.SetElement{Key: ip.AsSlice()})
			}
			add = append(add, nftables.SetElement{Key: ip.AsSlice(), VerdictData: kernel.Goto(ic.name)})
		}
		for ip := range old.dispatch {
			if _, ok := want.dispatch[ip]; !ok && ip.Is4() != v6 {
				del = append(del, nftables.SetElement{Key: ip.AsSlice()})
			}
		}
		x.elements(dispatchSet(v6), add, del)
	}
	key := func(k rrKey) []byte { return append(id32(k.svc), id32(k.turn)...) }
	for _, v6 := range []bool{false, true} {
		var add, del []nftables.SetElement
		for k, ep := range want.rr {
			if ep.to.Addr().Is4() == v6 {
				continue
			}
			oep, ok := old.rr[k]
			if ok && oep == ep {
				continue
			}
			if ok {
				del = append(del, nftables.SetElement{Key: key(k)})
			}
			add = append(add, nftables.SetElement{Key: key(k), Val: rrData(ep)})
		}
		for k, oep := range old.rr {
			if _, ok := want.rr[k]; !ok && oep.to.Addr().Is4() != v6 {
				del = append(del, nftables.SetElement{Key: key(k)})
			}
		}
		x.elements(roundRobinSet(v6), add, del)
	}
}

// elements deletes del then adds add to s, in messages of bounded size.
func (x *tx) elements(s *nftables.Set, add, del []nftables.SetElement) {
	s.Table = x.t
	for chunk := range slices.Chunk(del, elemsPerMessage) {
		x.fail(x.c.SetDeleteElements(s, chunk))
		x.n += len(chunk)
	}
	for chunk := range slices.Chunk(add, elemsPerMessage) {
		x.fail(x.c.SetAddElements(s, chunk))
		x.n += len(chunk)
	}
}

// deletions removes the chains want no longer has, referrers first (their
// rules and map elements are gone earlier in the same transaction). The
// affinity elements of a removed endpoint are no longer looked up (its rule
// went with the service chain's rewrite) and expire on their own; its id is
// never reused.
func (x *tx) deletions(old, want *state) {
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
}
