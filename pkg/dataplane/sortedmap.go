package dataplane

import (
	"iter"
	"slices"

	"github.com/causeway-net/causeway/internal/setdiff"
)

// sortedMap is the model's form of a set of owned objects: a map kept in
// key order, as two parallel slices. A lookup is a binary search, and the
// diff against a sorted wanted list is one merge of two sorted lists. The
// convergence changes it in batches (merge, removeAll), each one pass.
type sortedMap[K any, V any] struct {
	cmp  func(a, b K) int
	keys []K
	vals []V
}

func newSortedMap[K any, V any](cmp func(a, b K) int) *sortedMap[K, V] {
	return &sortedMap[K, V]{cmp: cmp}
}

func (m *sortedMap[K, V]) len() int { return len(m.keys) }

func (m *sortedMap[K, V]) get(k K) (V, bool) {
	if i, ok := slices.BinarySearchFunc(m.keys, k, m.cmp); ok {
		return m.vals[i], true
	}
	var zero V
	return zero, false
}

func (m *sortedMap[K, V]) has(k K) bool {
	_, ok := slices.BinarySearchFunc(m.keys, k, m.cmp)
	return ok
}

// set adds or replaces one entry.
func (m *sortedMap[K, V]) set(k K, v V) {
	i, ok := slices.BinarySearchFunc(m.keys, k, m.cmp)
	if ok {
		m.vals[i] = v
		return
	}
	m.keys = slices.Insert(m.keys, i, k)
	m.vals = slices.Insert(m.vals, i, v)
}

// remove deletes one entry.
func (m *sortedMap[K, V]) remove(k K) {
	if i, ok := slices.BinarySearchFunc(m.keys, k, m.cmp); ok {
		m.keys = slices.Delete(m.keys, i, i+1)
		m.vals = slices.Delete(m.vals, i, i+1)
	}
}

// merge adds the entries ks (sorted, unique, none present) with their
// values vs, in one pass.
func (m *sortedMap[K, V]) merge(ks []K, vs []V) {
	if len(ks) == 0 {
		return
	}
	if len(m.keys) == 0 || m.cmp(m.keys[len(m.keys)-1], ks[0]) < 0 {
		m.keys, m.vals = append(m.keys, ks...), append(m.vals, vs...)
		return
	}
	keys := make([]K, 0, len(m.keys)+len(ks))
	vals := make([]V, 0, len(m.keys)+len(ks))
	i, j := 0, 0
	for i < len(m.keys) || j < len(ks) {
		if j == len(ks) || (i < len(m.keys) && m.cmp(m.keys[i], ks[j]) < 0) {
			keys, vals = append(keys, m.keys[i]), append(vals, m.vals[i])
			i++
		} else {
			keys, vals = append(keys, ks[j]), append(vals, vs[j])
			j++
		}
	}
	m.keys, m.vals = keys, vals
}

// removeAll deletes the entries ks (sorted), in one pass.
func (m *sortedMap[K, V]) removeAll(ks []K) {
	if len(ks) == 0 {
		return
	}
	w, j := 0, 0
	for i := range m.keys {
		for j < len(ks) && m.cmp(ks[j], m.keys[i]) < 0 {
			j++
		}
		if j < len(ks) && m.cmp(ks[j], m.keys[i]) == 0 {
			continue
		}
		m.keys[w], m.vals[w] = m.keys[i], m.vals[i]
		w++
	}
	clear(m.keys[w:])
	clear(m.vals[w:])
	m.keys, m.vals = m.keys[:w], m.vals[:w]
}

// all iterates the entries in key order.
func (m *sortedMap[K, V]) all() iter.Seq2[K, V] {
	return func(yield func(K, V) bool) {
		for i, k := range m.keys {
			if !yield(k, m.vals[i]) {
				return
			}
		}
	}
}

// diff compares want, sorted by the map's order and unique, with the
// map's keys: what to add and what to remove (setdiff.Sorted).
func (m *sortedMap[K, V]) diff(want []K) (add, del []K) { return setdiff.Sorted(want, m.keys, m.cmp) }
