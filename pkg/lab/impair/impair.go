package impair

import (
	"encoding/binary"
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// Table is the inet table that holds the impairment.
const Table = "causeway-lab-impair"

// Impairment is what Break does to a namespace.
type Impairment struct {
	// Keep are the links left alone (e.g. "lo" and the link toward the
	// external host).
	Keep []string
	// LossPercent is the share of the other links' packets dropped at
	// random, each way; 0 or 100 drops them all.
	LossPercent int
}

// Break replaces the namespace's impairment (if any) with im.
func Break(nsPath string, im Impairment) error {
	if im.LossPercent < 0 || im.LossPercent > 100 {
		return fmt.Errorf("impair: loss %d %%: not within 0-100", im.LossPercent)
	}
	return withConn(nsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
		c.AddTable(t)
		c.DelTable(t) // an earlier impairment goes: one transaction
		c.AddTable(t)
		for _, hook := range []struct {
			name string
			hook *nftables.ChainHook
			link expr.MetaKey
		}{
			{"in", nftables.ChainHookPrerouting, expr.MetaKeyIIFNAME},
			{"out", nftables.ChainHookPostrouting, expr.MetaKeyOIFNAME},
		} {
			ch := c.AddChain(&nftables.Chain{Name: hook.name, Table: t, Type: nftables.ChainTypeFilter,
				Hooknum: hook.hook, Priority: nftables.ChainPriorityRaw})
			for _, name := range im.Keep {
				c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: keepLink(hook.link, name)})
			}
			c.AddRule(&nftables.Rule{Table: t, Chain: ch, Exprs: drop(im.LossPercent)})
		}
		if err := c.Flush(); err != nil {
			return fmt.Errorf("impair %s: %w", nsPath, err)
		}
		return nil
	})
}

// Mend removes the namespace's impairment; none is no error.
func Mend(nsPath string) error {
	return withConn(nsPath, func(c *nftables.Conn) error {
		t := &nftables.Table{Name: Table, Family: nftables.TableFamilyINet}
		c.AddTable(t) // so that the delete finds one
		c.DelTable(t)
		if err := c.Flush(); err != nil {
			return fmt.Errorf("mend %s: %w", nsPath, err)
		}
		return nil
	})
}

// Broken reports whether the namespace has an impairment.
func Broken(nsPath string) (bool, error) {
	var found bool
	err := withConn(nsPath, func(c *nftables.Conn) error {
		tables, err := c.ListTablesOfFamily(nftables.TableFamilyINet)
		if err != nil {
			return fmt.Errorf("list tables of %s: %w", nsPath, err)
		}
		for _, t := range tables {
			found = found || t.Name == Table
		}
		return nil
	})
	return found, err
}

// withConn runs fn with an nftables connection to the namespace at nsPath.
func withConn(nsPath string, fn func(*nftables.Conn) error) error {
	ns, err := netns.GetFromPath(nsPath)
	if err != nil {
		return fmt.Errorf("namespace %s: %w", nsPath, err)
	}
	defer ns.Close()
	c, err := nftables.New(nftables.WithNetNSFd(int(ns)))
	if err != nil {
		return fmt.Errorf("nftables of %s: %w", nsPath, err)
	}
	return fn(c)
}

// keepLink accepts the packets of the link name (key: its input or output
// link).
func keepLink(key expr.MetaKey, name string) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: key, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname(name)},
		&expr.Verdict{Kind: expr.VerdictAccept},
	}
}

// drop drops every packet, or percent of them at random ("numgen random
// mod 100 < percent").
func drop(percent int) []expr.Any {
	verdict := &expr.Verdict{Kind: expr.VerdictDrop}
	if percent == 0 || percent == 100 {
		return []expr.Any{verdict}
	}
	return []expr.Any{
		&expr.Numgen{Register: 1, Modulus: 100, Type: unix.NFT_NG_RANDOM},
		// The number is in host order; compared in network order, as nft
		// does.
		&expr.Byteorder{SourceRegister: 1, DestRegister: 1, Op: expr.ByteorderHton, Len: 4, Size: 4},
		&expr.Cmp{Op: expr.CmpOpLt, Register: 1, Data: binary.BigEndian.AppendUint32(nil, uint32(percent))},
		verdict,
	}
}

// ifname is a link name as the kernel compares it: IFNAMSIZ bytes, padded
// with zeros.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}
