package nexthopcheck

import (
	"fmt"
	"net/netip"
	"time"
)

// Peer is a neighbour to check: an address reached on a link.
type Peer struct {
	// Addr is the peer's address (IPv4 or IPv6; an IPv4-mapped IPv6
	// address is taken as IPv4).
	Addr netip.Addr
	// LinkIndex is the link the probes leave on (in the Checker's
	// namespace); 0 leaves the choice to the routes.
	LinkIndex int
}

func (p Peer) String() string {
	if p.LinkIndex == 0 {
		return p.Addr.String()
	}
	return fmt.Sprintf("%s@%d", p.Addr, p.LinkIndex)
}

// normal is p with its address unmapped and without a zone (the link says
// where it is).
func (p Peer) normal() Peer {
	p.Addr = p.Addr.Unmap().WithZone("")
	return p
}

// State is a peer's verdict.
type State uint8

const (
	// Unchecked: the peer is not probed (the Checker is off, or its
	// family's socket could not be opened).
	Unchecked State = iota
	// Up: the peer answers (or has not failed yet).
	Up
	// Down: the peer stopped answering.
	Down
)

func (s State) String() string {
	switch s {
	case Up:
		return "up"
	case Down:
		return "down"
	default:
		return "unchecked"
	}
}

// MarshalText makes a State read as its name in JSON.
func (s State) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads a State's name back (-debug's reader).
func (s *State) UnmarshalText(b []byte) error {
	for _, st := range []State{Unchecked, Up, Down} {
		if st.String() == string(b) {
			*s = st
			return nil
		}
	}
	return fmt.Errorf("nexthop state %q: not up, down or unchecked", b)
}

// Change is one peer's move to another state.
type Change struct {
	Peer  Peer
	State State
	At    time.Time
}

// Status is what the Checker knows of a peer (for -debug and metrics).
type Status struct {
	Peer  Peer   `json:"-"`
	Addr  string `json:"addr"`
	Link  int    `json:"link,omitempty"`
	State State  `json:"state"`
	// Since is the time of the last change of State (the time the peer
	// was added, before any).
	Since time.Time `json:"since"`
	// Sent, Answered and Lost count the probes; Late counts the answers
	// that came after their probe was judged lost.
	Sent     uint64 `json:"sent"`
	Answered uint64 `json:"answered"`
	Lost     uint64 `json:"lost"`
	Late     uint64 `json:"late,omitempty"`
	// Downs counts the moves to Down.
	Downs uint64 `json:"downs"`
	// RTT is the round trip of the last answered probe (kernel receive
	// time minus send time).
	RTT time.Duration `json:"rttNanos"`
	// HoldDown is the hold-down the peer serves at its next return.
	HoldDown time.Duration `json:"holdDownNanos"`
	// Error is the last error of a send, empty after a send that worked.
	Error string `json:"error,omitempty"`
}
