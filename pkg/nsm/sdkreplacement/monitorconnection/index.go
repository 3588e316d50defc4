package monitorconnection

import (
	"slices"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
)

// keyOf is the path segment id a selector requires in a connection's path:
// its first segment's id, or "" when it requires none (an empty selector,
// one of network services only, or a first segment that is a wildcard).
// A connection matches a keyed selector only if one of its path segments
// has that id, so the key narrows the candidates; the selector itself
// still decides.
func keyOf(sel *networkservice.MonitorScopeSelector) string {
	if segs := sel.GetPathSegments(); len(segs) > 0 {
		return segs[0].GetId()
	}
	return ""
}

// pathIDs are the distinct path segment ids of conn.
func pathIDs(conn *networkservice.Connection) []string {
	segs := conn.GetPath().GetPathSegments()
	ids := make([]string, 0, len(segs))
	for _, s := range segs {
		if id := s.GetId(); id != "" && !contains(ids, id) {
			ids = append(ids, id)
		}
	}
	return ids
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

// index is a set of values of type V by string key, each set a slice: a key
// is a path segment id, which one connection (or one stream) has in almost
// every case, and a slice of one is 16 to 24 bytes where a map of one was
// about 200 (0.5 MB of the proxy's heap at 500 targets). Adding and removing
// scan the key's slice.
type index[V comparable] map[string][]V

func (ix index[V]) add(key string, v V) {
	if !slices.Contains(ix[key], v) {
		ix[key] = append(ix[key], v)
	}
}

func (ix index[V]) remove(key string, v V) {
	set := ix[key]
	i := slices.Index(set, v)
	switch {
	case i < 0:
	case len(set) == 1:
		delete(ix, key)
	default:
		last := len(set) - 1
		set[i] = set[last]
		var zero V
		set[last] = zero
		ix[key] = set[:last]
	}
}

// streams are the open streams, by the key of their selector ("" for
// those without one).
type streams struct {
	byKey index[*subscriber]
}

func (s *streams) add(sub *subscriber)    { s.byKey.add(keyOf(sub.selector), sub) }
func (s *streams) remove(sub *subscriber) { s.byKey.remove(keyOf(sub.selector), sub) }

// watching calls fn for each stream whose selector matches conn, once.
func (s *streams) watching(conn *networkservice.Connection, fn func(*subscriber)) {
	visit := func(key string) {
		for _, sub := range s.byKey[key] {
			if conn.MatchesMonitorScopeSelector(sub.selector) {
				fn(sub)
			}
		}
	}
	visit("")
	for _, id := range pathIDs(conn) {
		visit(id)
	}
}

// held are the connections held, and their ids by path segment id.
type held struct {
	conns map[string]*networkservice.Connection
	bySeg index[string]
}

func (h *held) put(conn *networkservice.Connection) {
	id := conn.GetId()
	h.drop(id)
	h.conns[id] = conn
	for _, seg := range pathIDs(conn) {
		h.bySeg.add(seg, id)
	}
}

func (h *held) drop(id string) {
	old, ok := h.conns[id]
	if !ok {
		return
	}
	for _, seg := range pathIDs(old) {
		h.bySeg.remove(seg, id)
	}
	delete(h.conns, id)
}

// matching are the connections sel matches, by id: only those whose path
// has the selector's key when it has one.
func (h *held) matching(sel *networkservice.MonitorScopeSelector) map[string]*networkservice.Connection {
	key := keyOf(sel)
	if key == "" {
		return networkservice.FilterMapOnManagerScopeSelector(h.conns, sel)
	}
	out := make(map[string]*networkservice.Connection, len(h.bySeg[key]))
	for _, id := range h.bySeg[key] {
		if c := h.conns[id]; c.MatchesMonitorScopeSelector(sel) {
			out[id] = c
		}
	}
	return out
}
