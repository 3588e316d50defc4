package ipam

import (
	"container/heap"
	"slices"
)

// slots hands out the lowest free index in [first, limit) (first fit). Every
// index at or above high is free; the free indices below high are kept as
// ranges in a min-heap, so both take and put are O(log n) even for a node
// with a /64 worth of addresses.
type slots struct {
	first, limit uint64
	high         uint64
	free         rangeHeap
	used         uint64
}

// newSlots returns an allocator over [first, limit) with the indices in used
// taken. Indices outside the range or repeated must be filtered by the caller.
func newSlots(first, limit uint64, used []uint64) *slots {
	s := &slots{first: first, limit: limit, high: first}
	if len(used) == 0 {
		return s
	}
	sorted := slices.Clone(used)
	slices.Sort(sorted)
	next := first
	for _, u := range sorted {
		if u > next {
			s.free = append(s.free, indexRange{next, u - 1})
		}
		next = u + 1
	}
	s.high = next
	s.used = uint64(len(sorted))
	heap.Init(&s.free)
	return s
}

// take returns the lowest free index, or false when all are taken.
func (s *slots) take() (uint64, bool) {
	if len(s.free) > 0 {
		r := &s.free[0]
		i := r.lo
		if r.lo == r.hi {
			heap.Pop(&s.free)
		} else {
			r.lo++ // still the minimum: ranges do not overlap
		}
		s.used++
		return i, true
	}
	if s.high >= s.limit {
		return 0, false
	}
	i := s.high
	s.high++
	s.used++
	return i, true
}

// put frees index i, which must be taken.
func (s *slots) put(i uint64) {
	s.used--
	if i+1 == s.high {
		s.high--
		return
	}
	heap.Push(&s.free, indexRange{i, i})
}

type indexRange struct{ lo, hi uint64 }

type rangeHeap []indexRange

func (h rangeHeap) Len() int           { return len(h) }
func (h rangeHeap) Less(i, j int) bool { return h[i].lo < h[j].lo }
func (h rangeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *rangeHeap) Push(x any)        { *h = append(*h, x.(indexRange)) }
func (h *rangeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
