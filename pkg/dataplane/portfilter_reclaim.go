package dataplane

import (
	"fmt"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// A port that an earlier run left, which this run holds until its
// connection comes back, has no filter in this run's table: judged as an
// unfiltered port (an LB's), its frames would add their MAC to @claimed.
// When the connection comes back on the same link (a proxy restarted in its
// namespace keeps the targets' links) and the port gets its filter again,
// its own MAC would count as another port's, and the filter would drop
// every frame it sends. So a held port without a filter has a map entry
// that accepts its frames without claiming their MAC (a pass), replaced by
// its filter when it gets one and removed when the hold ends.

// heldUnfiltered are the held ports that goal gives no filter.
func (dp *Dataplane) heldUnfiltered(goal *spec) map[int]bool {
	if dp.leftovers == nil {
		return nil
	}
	out := map[int]bool{}
	for _, idx := range dp.leftovers.ports {
		if _, ok := goal.filters[idx]; !ok {
			out[idx] = true
		}
	}
	return out
}

// passDiff are the passes to add and to drop for fm to hold want. A table
// built anew holds none.
func passDiff(fm *filterState, want map[int]bool) (add, drop []int) {
	have := fm.passes
	if !fm.table {
		have = nil
	}
	for idx := range want {
		if !have[idx] {
			add = append(add, idx)
		}
	}
	for idx := range have {
		if !want[idx] {
			drop = append(drop, idx)
		}
	}
	slices.Sort(add)
	slices.Sort(drop)
	return add, drop
}

// setPasses drops and adds the passes (drops first: a port that gets its
// filter in the same transaction replaces its pass).
func (tx *portFilterTx) setPasses(c *nftables.Conn) error {
	if len(tx.dropPass) > 0 {
		var elems []nftables.SetElement
		for _, idx := range tx.dropPass {
			elems = append(elems, nftables.SetElement{Key: ifIndexKey(idx)})
		}
		if err := c.SetDeleteElements(tx.ports, elems); err != nil {
			return fmt.Errorf("map %s: passes: %w", pfPorts, err)
		}
	}
	if len(tx.addPass) > 0 {
		var elems []nftables.SetElement
		for _, idx := range tx.addPass {
			elems = append(elems, nftables.SetElement{Key: ifIndexKey(idx), VerdictData: &expr.Verdict{Kind: expr.VerdictAccept}})
		}
		if err := c.SetAddElements(tx.ports, elems); err != nil {
			return fmt.Errorf("map %s: passes: %w", pfPorts, err)
		}
	}
	return nil
}
