// Package setdiff owns the project's one comparison of a wanted set with a
// held one: both kept as lists sorted by one order, it yields what to add
// and what to remove in a single merge, whatever the kind of object
// (addresses, rules, ports, VIPs).
package setdiff

// Sorted returns the elements of want that have lacks (add) and those of
// have that want lacks (del). Both lists must be sorted by cmp and free of
// duplicates; the results are sorted too. It costs one pass over each list.
func Sorted[T any](want, have []T, cmp func(a, b T) int) (add, del []T) {
	i, j := 0, 0
	for i < len(want) && j < len(have) {
		switch c := cmp(want[i], have[j]); {
		case c < 0:
			add = append(add, want[i])
			i++
		case c > 0:
			del = append(del, have[j])
			j++
		default:
			i++
			j++
		}
	}
	add = append(add, want[i:]...)
	del = append(del, have[j:]...)
	return add, del
}
