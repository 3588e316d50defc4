package proxy

import (
	"net/netip"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// oneShot are the requests of the next Apply that concern links no
// connection keeps: the links connections had before a heal moved them
// (dataplane.State.Retired; their forwarder, if it is gone, will not remove
// them, and the connection's addresses would sit on two links, traffic
// leaving by the dead one), and the addresses of connections that came
// up on a port (State.Claims; a link an earlier run left with them is
// superseded). They are handed over until an Apply succeeds.
type oneShot struct {
	retired []dataplane.LinkRef
	claims  []dataplane.Claim
}

// add records that link port now carries a connection with addrs, which
// had link replaced (0: none) before.
func (o *oneShot) add(replaced int, replacedName string, port int, addrs []netip.Addr) {
	if replaced != 0 {
		o.retired = append(o.retired, dataplane.LinkRef{Index: replaced, Name: replacedName})
	}
	if len(addrs) > 0 {
		o.claims = append(o.claims, dataplane.Claim{Port: port, Addrs: addrs})
	}
}

// into puts the requests into s.
func (o *oneShot) into(s *dataplane.State) {
	s.Retired, s.Claims = o.retired, o.claims
}

// done drops the requests of s, which the dataplane has applied; those
// added since stay.
func (o *oneShot) done(s dataplane.State) {
	o.retired = o.retired[len(s.Retired):]
	o.claims = o.claims[len(s.Claims):]
}
