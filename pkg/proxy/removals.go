package proxy

import (
	"context"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// linkRemovals are the links no connection keeps that the dataplane must
// delete (dataplane.State.Remove): the links connections had before a heal
// moved them (their forwarder, if it is gone, will not remove them, and
// the connection's addresses would sit on two links, traffic leaving by
// the dead one), handed over until an Apply succeeds; and the links that
// closed connections left behind, whose releases wait for an Apply that
// deleted them before they hand the addresses back.
type linkRemovals struct {
	retired []dataplane.LinkRef
	closed  map[string]*closedLink // by connection id
}

// closedLink is the leftover link of a closed connection, the context of
// the release that asks for it (a cancelled release asks no more), and the
// signal that an Apply deleted it.
type closedLink struct {
	ref     dataplane.LinkRef
	release context.Context
	done    chan struct{}
}

// retire records that a connection moved from link index (0: none), named
// name, to another.
func (r *linkRemovals) retire(index int, name string) {
	if index != 0 {
		r.retired = append(r.retired, dataplane.LinkRef{Index: index, Name: name})
	}
}

// closeLink asks for the removal of link ref, which the closed connection
// id left, while ctx (its release's) lasts; the returned link's done is
// closed once an Apply deleted it.
func (r *linkRemovals) closeLink(ctx context.Context, id string, ref dataplane.LinkRef) *closedLink {
	if r.closed == nil {
		r.closed = map[string]*closedLink{}
	}
	c := &closedLink{ref: ref, release: ctx, done: make(chan struct{})}
	r.closed[id] = c
	return c
}

// forget drops the request c of connection id (its release stopped).
func (r *linkRemovals) forget(id string, c *closedLink) {
	if r.closed[id] == c {
		delete(r.closed, id)
	}
}

// into puts the requests into s: the retired links, and the closed
// connections' links of those whose release still runs and that still
// have no link (linked reports whether connection id has one again). It
// returns the closed links put in. Both are decided under p.mu, as a
// re-request's cancel and a link's announcement are.
func (r *linkRemovals) into(s *dataplane.State, linked func(id string) bool) []*closedLink {
	s.Remove = r.retired
	var closed []*closedLink
	for id, c := range r.closed {
		if c.release.Err() != nil || linked(id) {
			continue
		}
		if len(closed) == 0 {
			s.Remove = append(make([]dataplane.LinkRef, 0, len(r.retired)+len(r.closed)), r.retired...)
		}
		s.Remove = append(s.Remove, c.ref)
		closed = append(closed, c)
	}
	return closed
}

// done drops the requests that an Apply of s carried, which succeeded
// (closed are the closed links it carried); those added since stay.
func (r *linkRemovals) done(s dataplane.State, closed []*closedLink) {
	r.retired = r.retired[len(s.Remove)-len(closed):]
	for id, c := range r.closed {
		for _, d := range closed {
			if c == d {
				close(c.done)
				delete(r.closed, id)
			}
		}
	}
}
