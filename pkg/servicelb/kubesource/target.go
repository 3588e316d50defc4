package kubesource

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
)

// Target is one target pod connected to this proxy, as the Publisher sees
// it.
type Target struct {
	Namespace string
	Pod       string
	UID       types.UID
	Labels    map[string]string
	// Ready is the pod's readiness (and the target's connection up);
	// Terminating says that the pod is being deleted.
	Ready       bool
	Terminating bool
	// Addrs are the target's addresses on the secondary network, at most
	// one per family is used (the first).
	Addrs []netip.Addr
}

// addr returns t's first address of the family v4 (IPv6 otherwise).
func (t Target) addr(v4 bool) (netip.Addr, bool) {
	for _, a := range t.Addrs {
		if a = a.Unmap(); a.IsValid() && a.Is4() == v4 {
			return a, true
		}
	}
	return netip.Addr{}, false
}
