// Package ipcontextfake is the one fake ipcontext.Setter for the tests that
// run the chain elements without a proxy: it plays the proxy's address
// handling, one pair of addresses per connection (by proxy.ConnKey), kept
// across refreshes, and records every call. It imports nothing a product
// binary does not.
package ipcontextfake

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Setter gives connection n (counted in order of first appearance of its
// proxy.ConnKey, or of its id when it has no path) the addresses First+2n (source) and First+2n+1
// (destination) of Subnet, and Gateways as extra prefixes; the source
// addresses the request already carries (a target's VIPs) stay, as the
// proxy keeps them. It accepts connections of Type only, and fails every
// SetIPContext with Err when set. Safe for concurrent use once configured.
type Setter struct {
	Type     proxy.ConnType
	Subnet   netip.Prefix
	First    int      // host number of the first address
	Gateways []string // ExtraPrefixes of every connection
	Err      error    // when set, what SetIPContext returns (after recording the call)

	mu    sync.Mutex
	addrs map[string][2]netip.Prefix
	calls []Call
}

// Call is one call of the Setter.
type Call struct {
	Op   string // "set" or "unset"
	ID   string // the connection's id
	Type proxy.ConnType
}

var _ ipcontext.Setter = (*Setter)(nil)

// SetIPContext fills the IP context of conn with its pair of addresses.
func (s *Setter) SetIPContext(_ context.Context, conn *networkservice.Connection, t proxy.ConnType) error {
	if t != s.Type {
		return fmt.Errorf("unexpected connection type %v", t)
	}
	key, err := proxy.ConnKey(conn, t)
	if err != nil {
		key = conn.GetId() // a test's connection without a path
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Op: "set", ID: conn.GetId(), Type: t})
	if s.Err != nil {
		return s.Err
	}
	a, ok := s.addrs[key]
	if !ok {
		a = [2]netip.Prefix{s.host(2 * len(s.addrs)), s.host(2*len(s.addrs) + 1)}
		if s.addrs == nil {
			s.addrs = map[string][2]netip.Prefix{}
		}
		s.addrs[key] = a
	}
	if conn.GetContext() == nil {
		conn.Context = &networkservice.ConnectionContext{}
	}
	ipc := conn.GetContext().GetIpContext()
	if ipc == nil {
		ipc = &networkservice.IPContext{}
		conn.GetContext().IpContext = ipc
	}
	if !slices.Contains(ipc.SrcIpAddrs, a[0].String()) {
		ipc.SrcIpAddrs = append(ipc.SrcIpAddrs, a[0].String())
	}
	ipc.DstIpAddrs = []string{a[1].String()}
	ipc.ExtraPrefixes = s.Gateways
	return nil
}

// host is address First+i of Subnet, with Subnet's length.
func (s *Setter) host(i int) netip.Prefix {
	a := s.Subnet.Masked().Addr()
	for range s.First + i {
		a = a.Next()
	}
	return netip.PrefixFrom(a, s.Subnet.Bits())
}

// UnsetIPContext records the release; the addresses stay the connection's.
func (s *Setter) UnsetIPContext(_ context.Context, conn *networkservice.Connection, t proxy.ConnType) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, Call{Op: "unset", ID: conn.GetId(), Type: t})
	return nil
}

// Calls returns every call so far, in order.
func (s *Setter) Calls() []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

// Ops returns the operations of Calls ("set", "unset"), in order.
func (s *Setter) Ops() []string {
	var ops []string
	for _, c := range s.Calls() {
		ops = append(ops, c.Op)
	}
	return ops
}

// Counts returns the numbers of SetIPContext and UnsetIPContext calls.
func (s *Setter) Counts() (sets, unsets int) {
	for _, c := range s.Calls() {
		if c.Op == "set" {
			sets++
		} else {
			unsets++
		}
	}
	return sets, unsets
}
