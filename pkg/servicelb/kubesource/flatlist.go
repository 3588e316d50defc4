package kubesource

import (
	"slices"
)

// flatList is the list a handler gets, kept assembled: each entry owns the
// slots of its items, and replacing an entry's items moves at most one
// other item per slot freed (the last one into the hole), so that a change
// costs its own items and a delivery one copy of the list.
type flatList[T any] struct {
	items  []T
	owners []*[]int // the slots of each item's owner
}

// replace makes vals the items of the owner of slots.
func (f *flatList[T]) replace(slots *[]int, vals []T) {
	old := *slots
	slices.SortFunc(old, func(a, b int) int { return b - a }) // highest first: a moved item is never one of ours
	for _, i := range old {
		last := len(f.items) - 1
		if i != last {
			f.items[i], f.owners[i] = f.items[last], f.owners[last]
			moved := *f.owners[i]
			moved[slices.Index(moved, last)] = i
		}
		var zero T
		f.items[last], f.owners[last] = zero, nil
		f.items, f.owners = f.items[:last], f.owners[:last]
	}
	*slots = old[:0]
	for _, v := range vals {
		*slots = append(*slots, len(f.items))
		f.items = append(f.items, v)
		f.owners = append(f.owners, slots)
	}
}

// clone returns a copy of the items for a handler (which may keep it).
func (f *flatList[T]) clone() []T { return slices.Clone(f.items) }
