package monitorconnection

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
)

func seg(name, id string) *networkservice.PathSegment {
	return &networkservice.PathSegment{Name: name, Id: id}
}

func path(segs ...*networkservice.PathSegment) *networkservice.Path {
	return &networkservice.Path{PathSegments: segs}
}

// The index finds exactly the streams and connections that a check of
// every selector against every connection finds, for every kind of
// selector an NSMgr or a tool sends.
func TestIndexMatchesLikeTheSelectors(t *testing.T) {
	conns := []*networkservice.Connection{
		{Id: "a", NetworkService: "svc", Path: path(seg("nsc", "a-0"), seg("nsmgr", "a-1"), seg("proxy", "a"))},
		{Id: "b", NetworkService: "svc", Path: path(seg("nsc", "b-0"), seg("nsmgr", "b-1"), seg("proxy", "b"))},
		{Id: "c", NetworkService: "other", Path: path(seg("nsc", "c-0"), seg("nsmgr", "a-1"), seg("proxy", "c"))},
		{Id: "d", NetworkService: "svc"},
	}
	selectors := []*networkservice.MonitorScopeSelector{
		{},
		{NetworkServices: []string{"svc"}},
		{PathSegments: []*networkservice.PathSegment{seg("", "a")}},
		{PathSegments: []*networkservice.PathSegment{seg("nsmgr", "a-1")}},
		{PathSegments: []*networkservice.PathSegment{seg("nsmgr", "")}},
		{PathSegments: []*networkservice.PathSegment{seg("", "a-1"), seg("proxy", "c")}},
		{PathSegments: []*networkservice.PathSegment{seg("", ""), seg("", "b")}},
		{PathSegments: []*networkservice.PathSegment{seg("", "a-0")}, NetworkServices: []string{"other"}},
		{PathSegments: []*networkservice.PathSegment{seg("", "nowhere")}},
	}
	var ss streams
	ss.byKey = index[*subscriber]{}
	subs := make([]*subscriber, len(selectors))
	for i, sel := range selectors {
		subs[i] = &subscriber{selector: sel}
		ss.add(subs[i])
	}
	h := held{conns: map[string]*networkservice.Connection{}, bySeg: index[string]{}}
	for _, c := range conns {
		h.put(c)
	}
	for _, c := range conns {
		var want, got []int
		for i, sel := range selectors {
			if c.MatchesMonitorScopeSelector(sel) {
				want = append(want, i)
			}
		}
		ss.watching(c, func(s *subscriber) { got = append(got, slices.Index(subs, s)) })
		slices.Sort(got)
		require.Equal(t, want, got, "streams watching %s", c.GetId())
	}
	for i, sel := range selectors {
		want := networkservice.FilterMapOnManagerScopeSelector(h.conns, sel)
		require.Equal(t, sortedKeys(want), sortedKeys(h.matching(sel)), "connections of selector %d", i)
	}

	// A refresh that changes the path re-indexes; a delete forgets.
	h.put(&networkservice.Connection{Id: "a", NetworkService: "svc", Path: path(seg("nsc", "a-0"), seg("nsmgr", "a-9"), seg("proxy", "a"))})
	require.Empty(t, h.matching(&networkservice.MonitorScopeSelector{PathSegments: []*networkservice.PathSegment{seg("", "a-9"), seg("", "b")}}))
	require.Equal(t, []string{"c"}, sortedKeys(h.matching(selectors[3])), "a's old segment no longer finds it")
	h.drop("c")
	require.Empty(t, h.matching(selectors[3]))
	require.Empty(t, h.bySeg["a-1"], "no empty sets are kept")
	ss.remove(subs[2])
	require.NotContains(t, ss.byKey, "a")
}

func sortedKeys(m map[string]*networkservice.Connection) []string {
	return slices.Sorted(maps.Keys(m))
}

// BenchmarkPublish: the cost of one event with n open streams, each
// watching its own connection as an NSMgr's do. It does not grow with n;
// the baseline, "scan", is the selection the monitor made before it had
// the index (every selector checked), which does.
func BenchmarkPublish(b *testing.B) {
	for _, n := range []int{100, 1000, 10000} {
		m := New(b.Context())
		var all []*subscriber
		for i := range n {
			id := fmt.Sprintf("c%d", i)
			m.conns.put(&networkservice.Connection{Id: id, Path: path(seg("nsmgr", id+"-mgr"), seg("proxy", id))})
			s := &subscriber{selector: &networkservice.MonitorScopeSelector{
				PathSegments: []*networkservice.PathSegment{{Id: id + "-mgr"}}}, ready: make(chan struct{}, 1)}
			m.subs.add(s)
			all = append(all, s)
		}
		c := &networkservice.Connection{Id: "c7", Path: path(seg("nsmgr", "c7-mgr"), seg("proxy", "c7"))}
		b.Run(fmt.Sprintf("index-%d", n), func(b *testing.B) {
			for range b.N {
				m.publish(networkservice.ConnectionEventType_UPDATE, c)
				all[7].take()
			}
		})
		b.Run(fmt.Sprintf("scan-%d", n), func(b *testing.B) {
			for range b.N {
				for _, s := range all {
					if c.MatchesMonitorScopeSelector(s.selector) {
						s.push(&networkservice.ConnectionEvent{})
					}
				}
				all[7].take()
			}
		})
	}
}
