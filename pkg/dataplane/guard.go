package dataplane

import (
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/nftconn"
)

// GuardTable is the name of the Dataplane's nftables table (inet family)
// that keeps whatever arrives over the bridge (the targets, and anything
// that reaches a target) from the namespace's own TCP listeners named in
// Options.GuardedPorts: a connection to one of them from there is reset.
// The bridge forwards and routes as before; only what the namespace itself
// would receive on those ports is refused (the input hook sees no routed
// packet).
const GuardTable = "causeway-guard"

// guardChain is the table's one chain, on the input hook.
const guardChain = "input"

var guardTable = &nftables.Table{Family: nftables.TableFamilyINet, Name: GuardTable}

// loadGuardLocked reads back whether the guard table is there: one that
// someone deleted is set again by the next convergence (a Resync).
func (dp *Dataplane) loadGuardLocked() error {
	dp.read()
	ok, err := nftconn.TableExists(dp.ns, nftables.TableFamilyINet, GuardTable)
	if err != nil {
		return err
	}
	dp.m.guard = ok
	return nil
}

// applyGuardLocked sets the guard table of Options.GuardedPorts when want
// and it is not there, and removes it when not want and it is (an earlier
// run's, or at Teardown).
func (dp *Dataplane) applyGuardLocked(want bool) error {
	switch {
	case want && !dp.m.guard:
		if err := dp.write(opGuardSet, GuardTable, func() error { return guardPorts(dp.ns, dp.opts.BridgeName, dp.opts.GuardedPorts) }); err != nil {
			return err
		}
	case !want && dp.m.guard:
		if err := dp.write(opGuardDel, GuardTable, func() error { return guardPorts(dp.ns, dp.opts.BridgeName, nil) }); err != nil {
			return err
		}
	}
	dp.m.guard = want
	return nil
}

// guardPorts makes the guard table refuse, from the link bridge, TCP to
// ports, in one transaction that replaces the table whole; no ports
// removes it (an earlier run's included). A port given twice counts once;
// port 0 is refused.
func guardPorts(ns netns.NsHandle, bridge string, ports []uint16) error {
	if slices.Contains(ports, 0) {
		return fmt.Errorf("guarded port 0: not a port")
	}
	c, err := nftconn.Open(ns)
	if err != nil {
		return err
	}
	c.AddTable(guardTable) // so that the delete below never fails
	c.DelTable(guardTable)
	if len(ports) > 0 {
		c.AddTable(guardTable)
		chain := c.AddChain(&nftables.Chain{
			Name: guardChain, Table: guardTable, Type: nftables.ChainTypeFilter,
			Hooknum: nftables.ChainHookInput, Priority: nftables.ChainPriorityFilter,
		})
		for _, p := range sortedUnique(ports) {
			c.AddRule(&nftables.Rule{Table: guardTable, Chain: chain, Exprs: guardRule(bridge, p)})
		}
	}
	if err := c.Flush(); err != nil {
		return fmt.Errorf("nftables table inet %s: %w", GuardTable, err)
	}
	return nil
}

// guardRule is `iifname <bridge> meta l4proto tcp tcp dport <port> reject
// with tcp reset`.
func guardRule(bridge string, port uint16) []expr.Any {
	name := make([]byte, unix.IFNAMSIZ)
	copy(name, bridge)
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIFNAME, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: name},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binary.BigEndian.AppendUint16(nil, port)},
		&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
	}
}

// sortedUnique is ports sorted, each once.
func sortedUnique(ports []uint16) []uint16 {
	out := slices.Clone(ports)
	slices.Sort(out)
	return slices.Compact(out)
}
