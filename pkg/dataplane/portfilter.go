package dataplane

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// PortFilter holds one bridge port (a target's) to what its owner may
// send: frames from one MAC only, the first the port sends from (a MAC
// another port or the bridge already uses is never taken), and, in ARP,
// IPv4 and IPv6, only its own addresses and the State's VIPs as sender or
// source (IPv6 link-local and unspecified sources aside, for neighbour
// discovery), with no router advertisement or redirect, and only other
// frame types than ARP, IPv4 and IPv6 dropped. The kernel enforces it in
// the Dataplane's own nftables table of the bridge family (PortFilterTable),
// before the bridge forwards or delivers a frame.
// It is an attribute of the port it filters (Port.Filter).
type PortFilter struct {
	// Addrs are the port owner's own addresses (at most a few).
	Addrs []netip.Addr `json:"addrs"`
}

// PortFilterTable is the name of the Dataplane's nftables table (bridge
// family) that holds the port filters.
const PortFilterTable = "causeway-ports"

// portFilter is one normalised PortFilter: the source ranges the port may
// use, per family (its addresses and the VIPs), masked, sorted, unique.
type portFilter struct {
	src [2][]netip.Prefix
}

func (a portFilter) equal(b portFilter) bool {
	return slices.Equal(a.src[v4], b.src[v4]) && slices.Equal(a.src[v6], b.src[v6])
}

// normalizeFilters validates the filters of ports and returns them by
// port, each with the VIPs added to its own addresses.
func normalizeFilters(ports []Port, vips []netip.Prefix) (map[int]portFilter, error) {
	out := map[int]portFilter{}
	for _, port := range ports {
		f := port.Filter
		if f == nil || port.Index <= 0 {
			continue
		}
		if _, dup := out[port.Index]; dup {
			return nil, fmt.Errorf("port filter %d: given twice", port.Index)
		}
		var pf portFilter
		for _, a := range f.Addrs {
			a = a.Unmap().WithZone("")
			if !a.IsValid() || a.IsUnspecified() || a.IsMulticast() {
				return nil, fmt.Errorf("port filter %d: address %v: not a unicast address", port.Index, a)
			}
			pf.src[familyOf(a)] = append(pf.src[familyOf(a)], netip.PrefixFrom(a, a.BitLen()))
		}
		for _, p := range vips {
			pf.src[familyOf(p.Addr())] = append(pf.src[familyOf(p.Addr())], p)
		}
		for _, fam := range families {
			pf.src[fam] = sortSet(pf.src[fam], netip.Prefix.Compare)
		}
		out[port.Index] = pf
	}
	return out, nil
}

// filterState is what the model holds of the port filter table.
type filterState struct {
	// table: the table exists as this run built it; leftover: one that an
	// earlier run left was found at the start (kept, enforcing, until the
	// first Apply replaces or removes it).
	table, leftover bool
	ports           map[int]portFilter
	// passes are the held ports of an earlier run that have no filter
	// yet: their frames pass without claiming their MAC (portfilter_reclaim.go).
	passes map[int]bool
}

// applyFiltersLocked makes the port filter table hold goal's filters, in
// one nftables transaction that changes only the ports whose filter
// changed. The adopted state (before the first Apply) leaves the table as
// it is.
func (dp *Dataplane) applyFiltersLocked(goal *spec) error {
	if goal.keepFilters {
		return nil
	}
	fm := &dp.m.filters
	if len(goal.filters) == 0 {
		if !fm.table && !fm.leftover {
			return nil
		}
		if err := dp.write(opFilterDel, PortFilterTable, func() error { return deletePortFilterTable(dp.ns) }); err != nil {
			return err
		}
		*fm = filterState{}
		return nil
	}
	var added, changed, removed []int
	for idx, pf := range goal.filters {
		old, ok := fm.ports[idx]
		switch {
		case !ok || !fm.table:
			added = append(added, idx)
		case !old.equal(pf):
			changed = append(changed, idx)
		}
	}
	if fm.table {
		for idx := range fm.ports {
			if _, ok := goal.filters[idx]; !ok {
				removed = append(removed, idx)
			}
		}
	}
	passes := dp.heldUnfiltered(goal)
	addPass, dropPass := passDiff(fm, passes)
	if fm.table && len(added)+len(changed)+len(removed)+len(addPass)+len(dropPass) == 0 {
		return nil
	}
	tx := portFilterTx{fresh: !fm.table, bridgeMAC: dp.bridgeMAC, addPass: addPass, dropPass: dropPass}
	for _, idx := range added {
		tx.add = append(tx.add, portFilterOf(idx, goal.filters[idx]))
	}
	for _, idx := range changed {
		tx.change = append(tx.change, portFilterOf(idx, goal.filters[idx]))
	}
	tx.remove = removed
	object := fmt.Sprintf("%s ports +%d ~%d -%d", PortFilterTable, len(added), len(changed), len(removed))
	if err := dp.write(opFilterSet, object, func() error { return tx.run(dp.ns) }); err != nil {
		return err
	}
	*fm = filterState{table: true, ports: maps.Clone(goal.filters), passes: passes}
	return nil
}

// loadFiltersLocked reads back whether the table is there: one that
// someone deleted is built again whole by the next convergence.
func (dp *Dataplane) loadFiltersLocked() error {
	dp.read()
	ok, err := portFilterTableExists(dp.ns)
	if err != nil {
		return err
	}
	if !ok {
		dp.m.filters.table = false
		dp.m.filters.leftover = false
	}
	return nil
}

// findLeftoverFiltersLocked notes a table that an earlier run left.
func (dp *Dataplane) findLeftoverFiltersLocked() error {
	dp.read()
	ok, err := portFilterTableExists(dp.ns)
	dp.m.filters.leftover = ok
	return err
}
