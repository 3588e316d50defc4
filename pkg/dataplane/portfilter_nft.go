package dataplane

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
	"strconv"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/nftconn"
)

// The port filter table's layout (bridge family, hook prerouting, so every
// frame a port sends is judged before the bridge forwards or delivers it):
//
//	chain ingress: meta iif vmap @ports (goto port-<idx>); add @claimed { ether saddr }
//	chain port-<idx>: the port's MAC (set mac-<idx>, one element, taken on first use
//	                  unless @claimed holds it), then goto check-<idx>
//	chain check-<idx>: ARP sender MAC and address, IPv4 and IPv6 sources (sets
//	                   v4-<idx>, v6-<idx>), no RA or redirect, NA targets; other types dropped
//
// Frames of ports without a filter (the load balancers') only add their
// source MAC to @claimed, so that no target can take it later.
const (
	pfIngress = "ingress"
	pfPorts   = "ports"
	pfClaimed = "claimed"
	// pfClaimedSize bounds the MACs the table remembers.
	pfClaimedSize = 65536
)

var pfTable = &nftables.Table{Name: PortFilterTable, Family: nftables.TableFamilyBridge}

func pfName(kind string, idx int) string { return kind + "-" + strconv.Itoa(idx) }

// pfPort is one port's filter as the transaction writes it.
type pfPort struct {
	idx int
	src [2][]netip.Prefix
}

func portFilterOf(idx int, pf portFilter) pfPort { return pfPort{idx: idx, src: pf.src} }

// portFilterTx is one atomic change of the table.
type portFilterTx struct {
	// fresh: build the table anew (replacing any that exists).
	fresh          bool
	bridgeMAC      net.HardwareAddr
	add, change    []pfPort
	remove         []int
	addPass        []int // held ports whose frames pass unclaimed (portfilter_reclaim.go)
	dropPass       []int
	ports, claimed *nftables.Set
	ingress        *nftables.Chain
}

func (tx *portFilterTx) run(ns netns.NsHandle) error {
	c, err := nftconn.Open(ns)
	if err != nil {
		return err
	}
	tx.ports = &nftables.Set{Table: pfTable, Name: pfPorts, IsMap: true, KeyType: nftables.TypeIFIndex, DataType: nftables.TypeVerdict}
	tx.claimed = &nftables.Set{Table: pfTable, Name: pfClaimed, KeyType: nftables.TypeEtherAddr, Dynamic: true, Size: pfClaimedSize}
	if tx.fresh {
		if err := tx.build(c); err != nil {
			return err
		}
	}
	for _, idx := range tx.remove {
		if err := tx.removePort(c, idx); err != nil {
			return err
		}
	}
	for _, p := range tx.change {
		if err := tx.setSources(c, p, true); err != nil {
			return err
		}
	}
	if err := tx.setPasses(c); err != nil {
		return err
	}
	for _, p := range tx.add {
		if err := tx.addPort(c, p); err != nil {
			return err
		}
	}
	return c.Flush()
}

// build replaces the table with an empty one: the ingress chain, the
// claimed MACs (the bridge's among them) and the port map.
func (tx *portFilterTx) build(c *nftables.Conn) error {
	c.AddTable(pfTable) // so that the delete below never fails
	c.DelTable(pfTable)
	c.AddTable(pfTable)
	tx.ingress = c.AddChain(&nftables.Chain{
		Name: pfIngress, Table: pfTable, Type: nftables.ChainTypeFilter,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityFilter,
	})
	var seed []nftables.SetElement
	if len(tx.bridgeMAC) == 6 {
		seed = append(seed, nftables.SetElement{Key: tx.bridgeMAC})
	}
	if err := c.AddSet(tx.claimed, seed); err != nil {
		return fmt.Errorf("set %s: %w", pfClaimed, err)
	}
	if err := c.AddSet(tx.ports, nil); err != nil {
		return fmt.Errorf("map %s: %w", pfPorts, err)
	}
	c.AddRule(&nftables.Rule{Table: pfTable, Chain: tx.ingress, Exprs: []expr.Any{
		&expr.Meta{Key: expr.MetaKeyIIF, Register: 1},
		&expr.Lookup{SourceRegister: 1, SetName: pfPorts, SetID: tx.ports.ID, DestRegister: 0, IsDestRegSet: true},
	}})
	c.AddRule(&nftables.Rule{Table: pfTable, Chain: tx.ingress, Exprs: []expr.Any{
		etherSaddr(),
		&expr.Dynset{SrcRegKey: 1, SetName: pfClaimed, SetID: tx.claimed.ID, Operation: uint32(unix.NFT_DYNSET_OP_ADD)},
	}})
	return nil
}

func ifIndexKey(idx int) []byte { return binary.NativeEndian.AppendUint32(nil, uint32(idx)) }

// addPort adds a port's sets, chains and map entry.
func (tx *portFilterTx) addPort(c *nftables.Conn, p pfPort) error {
	mac := &nftables.Set{Table: pfTable, Name: pfName("mac", p.idx), KeyType: nftables.TypeEtherAddr, Dynamic: true, Size: 1}
	if err := c.AddSet(mac, nil); err != nil {
		return fmt.Errorf("set %s: %w", mac.Name, err)
	}
	if err := tx.setSources(c, p, false); err != nil {
		return err
	}
	check := c.AddChain(&nftables.Chain{Name: pfName("check", p.idx), Table: pfTable})
	port := c.AddChain(&nftables.Chain{Name: pfName("port", p.idx), Table: pfTable})
	for _, exprs := range macRules(mac, tx.claimed, check.Name) {
		c.AddRule(&nftables.Rule{Table: pfTable, Chain: port, Exprs: exprs})
	}
	for _, exprs := range checkRules(p.idx, mac) {
		c.AddRule(&nftables.Rule{Table: pfTable, Chain: check, Exprs: exprs})
	}
	err := c.SetAddElements(tx.ports, []nftables.SetElement{{
		Key: ifIndexKey(p.idx), VerdictData: &expr.Verdict{Kind: expr.VerdictGoto, Chain: port.Name},
	}})
	if err != nil {
		return fmt.Errorf("map %s: port %d: %w", pfPorts, p.idx, err)
	}
	return nil
}

// setSources writes the port's v4 and v6 source sets (emptied first when
// they exist).
func (tx *portFilterTx) setSources(c *nftables.Conn, p pfPort, exists bool) error {
	for _, f := range families {
		s := &nftables.Set{Table: pfTable, Name: srcSetName(f, p.idx), KeyType: nftables.TypeIPAddr, Interval: true}
		if f == v6 {
			s.KeyType = nftables.TypeIP6Addr
		}
		elems := intervalElements(f, sourcesOf(f, p.src[f]))
		if exists {
			c.FlushSet(s)
			if err := c.SetAddElements(s, elems); err != nil {
				return fmt.Errorf("set %s: %w", s.Name, err)
			}
			continue
		}
		if err := c.AddSet(s, elems); err != nil {
			return fmt.Errorf("set %s: %w", s.Name, err)
		}
	}
	return nil
}

func srcSetName(f family, idx int) string {
	if f == v6 {
		return pfName("v6", idx)
	}
	return pfName("v4", idx)
}

// sourcesOf adds what every port may use in family f: IPv6 link-local and
// unspecified sources, for neighbour discovery.
func sourcesOf(f family, own []netip.Prefix) []netip.Prefix {
	if f == v4 {
		return own
	}
	return append([]netip.Prefix{netip.MustParsePrefix("::/128"), netip.MustParsePrefix("fe80::/10")}, own...)
}

// removePort takes a port out: its map entry, its MAC out of @claimed, its
// chains and sets.
func (tx *portFilterTx) removePort(c *nftables.Conn, idx int) error {
	mac := &nftables.Set{Table: pfTable, Name: pfName("mac", idx), KeyType: nftables.TypeEtherAddr}
	pinned, err := c.GetSetElements(mac)
	if err != nil {
		return fmt.Errorf("read set %s: %w", mac.Name, err)
	}
	if err := c.SetDeleteElements(tx.ports, []nftables.SetElement{{Key: ifIndexKey(idx)}}); err != nil {
		return fmt.Errorf("map %s: port %d: %w", pfPorts, idx, err)
	}
	if len(pinned) > 0 {
		if err := c.SetDeleteElements(tx.claimed, pinned); err != nil {
			return fmt.Errorf("set %s: %w", pfClaimed, err)
		}
	}
	port := &nftables.Chain{Name: pfName("port", idx), Table: pfTable}
	check := &nftables.Chain{Name: pfName("check", idx), Table: pfTable}
	c.FlushChain(port)
	c.FlushChain(check)
	c.DelChain(port)
	c.DelChain(check)
	c.DelSet(mac)
	for _, f := range families {
		c.DelSet(&nftables.Set{Table: pfTable, Name: srcSetName(f, idx)})
	}
	return nil
}

// portFilterTableExists reports whether ns has the port filter table.
func portFilterTableExists(ns netns.NsHandle) (bool, error) {
	return nftconn.TableExists(ns, nftables.TableFamilyBridge, PortFilterTable)
}

// deletePortFilterTable removes the table; a missing one is no error.
func deletePortFilterTable(ns netns.NsHandle) error {
	c, err := nftconn.Open(ns)
	if err != nil {
		return err
	}
	c.AddTable(pfTable)
	c.DelTable(pfTable)
	return c.Flush()
}
