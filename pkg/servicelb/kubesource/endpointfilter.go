package kubesource

import (
	"log/slog"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"
)

// endpointFilter keeps a Service's endpoints to the addresses a target of
// the conduit can have: inside the conduit's pools (when they are given),
// and never loopback, link-local (a cloud's metadata service), multicast or
// unspecified. Any slice with the right labels is read, so a slice whose
// addresses point elsewhere must not make the provider dial there. Each
// address refused is logged once per Service (up to maxLogged in all).
// Its methods run under the tracker's lock.
type endpointFilter struct {
	pools  []netip.Prefix
	log    *slog.Logger
	logged map[refusedEndpoint]struct{}
}

type refusedEndpoint struct {
	svc  types.NamespacedName
	addr netip.Addr
}

// maxLogged bounds the refusals remembered as logged.
const maxLogged = 4096

func newEndpointFilter(pools []netip.Prefix, log *slog.Logger) *endpointFilter {
	return &endpointFilter{pools: pools, log: log, logged: map[refusedEndpoint]struct{}{}}
}

// allow reports whether a may be an endpoint of svc (slice names the
// slice it came from, for the log).
func (f *endpointFilter) allow(svc types.NamespacedName, slice string, a netip.Addr) bool {
	why := f.refusal(a)
	if why == "" {
		return true
	}
	k := refusedEndpoint{svc, a}
	if _, done := f.logged[k]; !done && len(f.logged) < maxLogged {
		f.logged[k] = struct{}{}
		f.log.Warn("endpoint ignored", "service", svc.String(), "slice", slice, "address", a, "reason", why)
		if len(f.logged) == maxLogged {
			f.log.Warn("endpoints ignored: further ones are not logged", "logged", maxLogged)
		}
	}
	return false
}

func (f *endpointFilter) refusal(a netip.Addr) string {
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsLinkLocalUnicast():
		return "link-local (a metadata service)"
	case a.IsMulticast() || a.IsLinkLocalMulticast() || a.IsInterfaceLocalMulticast():
		return "multicast"
	case a.IsUnspecified():
		return "unspecified"
	case len(f.pools) == 0:
		return ""
	}
	for _, p := range f.pools {
		if p.Contains(a) {
			return ""
		}
	}
	return "outside the conduit's pools"
}
