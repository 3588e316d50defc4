// Package ipcontextfake is the one fake ipcontext.Setter for the tests that
// run the chain elements without a proxy: it plays the proxy's address
// handling, one pair of addresses per connection, kept across refreshes.
// It imports nothing a product binary does not.
package ipcontextfake

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/networkservicemesh/api/pkg/api/networkservice"

	"github.com/causeway-net/causeway/pkg/nsm/chain/ipcontext"
	"github.com/causeway-net/causeway/pkg/proxy"
)

// Setter gives connection n (counted in order of first appearance) the
// addresses First+2n (source) and First+2n+1 (destination) of Subnet, and
// Gateways as extra prefixes. It accepts connections of Type only. Safe for
// concurrent use once configured.
type Setter struct {
	Type     proxy.ConnType
	Subnet   netip.Prefix
	First    int      // host number of the first address
	Gateways []string // ExtraPrefixes of every connection

	mu     sync.Mutex
	addrs  map[string][2]netip.Prefix
	sets   int
	unsets int
}

var _ ipcontext.Setter = (*Setter)(nil)

// SetIPContext fills the IP context of conn with its pair of addresses.
func (s *Setter) SetIPContext(_ context.Context, conn *networkservice.Connection, t proxy.ConnType) error {
	if t != s.Type {
		return fmt.Errorf("unexpected connection type %v", t)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sets++
	a, ok := s.addrs[conn.GetId()]
	if !ok {
		a = [2]netip.Prefix{s.host(2 * len(s.addrs)), s.host(2*len(s.addrs) + 1)}
		if s.addrs == nil {
			s.addrs = map[string][2]netip.Prefix{}
		}
		s.addrs[conn.GetId()] = a
	}
	if conn.GetContext() == nil {
		conn.Context = &networkservice.ConnectionContext{}
	}
	conn.GetContext().IpContext = &networkservice.IPContext{
		SrcIpAddrs:    []string{a[0].String()},
		DstIpAddrs:    []string{a[1].String()},
		ExtraPrefixes: s.Gateways,
	}
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

// UnsetIPContext counts the release; the addresses stay the connection's.
func (s *Setter) UnsetIPContext(context.Context, *networkservice.Connection, proxy.ConnType) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.unsets++
	return nil
}

// Counts returns the numbers of SetIPContext and UnsetIPContext calls.
func (s *Setter) Counts() (sets, unsets int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sets, s.unsets
}
