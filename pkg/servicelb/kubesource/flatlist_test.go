package kubesource

import (
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Whatever the order of replacements, the list holds exactly the owners'
// current items.
func TestFlatListKeepsEveryOwnersItems(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var f flatList[int]
	slots := make([][]int, 50)
	want := make([][]int, 50)
	for step := range 5000 {
		o := r.IntN(len(slots))
		vals := make([]int, r.IntN(3))
		for i := range vals {
			vals[i] = step*10 + i
		}
		f.replace(&slots[o], vals)
		want[o] = vals
	}
	var all []int
	for o := range slots {
		got := make([]int, 0, len(slots[o]))
		for _, i := range slots[o] {
			got = append(got, f.items[i])
		}
		require.ElementsMatch(t, want[o], got, "owner %d", o)
		all = append(all, want[o]...)
	}
	items := f.clone()
	slices.Sort(all)
	slices.Sort(items)
	require.Equal(t, all, items, "nothing else in the list")
}
