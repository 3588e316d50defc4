package setdiff

import (
	"cmp"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSorted(t *testing.T) {
	have := []int{1, 3, 5}
	for name, tc := range map[string]struct {
		want, add, del []int
	}{
		"adds only":    {want: []int{1, 2, 3, 4, 5}, add: []int{2, 4}},
		"both ways":    {want: []int{2, 3, 7}, add: []int{2, 7}, del: []int{1, 5}},
		"nothing kept": {want: nil, del: []int{1, 3, 5}},
		"equal":        {want: []int{1, 3, 5}},
	} {
		add, del := Sorted(tc.want, have, cmp.Compare[int])
		require.Equal(t, tc.add, add, name)
		require.Equal(t, tc.del, del, name)
	}
}

func TestSortedEmptyHave(t *testing.T) {
	add, del := Sorted([]int{4, 8}, nil, cmp.Compare[int])
	require.Equal(t, []int{4, 8}, add)
	require.Nil(t, del)
}
