package servicelb

import (
	"errors"
	"net/netip"
	"time"
)

// Errors of NextEndpoint.
var (
	// ErrMissingServiceEntry: the balancer knows nothing of the service port.
	ErrMissingServiceEntry = errors.New("missing service entry")
	// ErrMissingEndpoints: the service port is known but has no endpoints.
	ErrMissingEndpoints = errors.New("missing endpoints")
)

// LoadBalancer picks the endpoint of each new connection or flow of a
// service port.
type LoadBalancer interface {
	EndpointsHandler
	// NextEndpoint returns the endpoint for a new connection from client.
	// With reset set (a dial to the endpoint it gave before failed), an
	// affinity record is ignored and the client is pinned to the next
	// endpoint in turn.
	NextEndpoint(svc ServicePortName, client netip.Addr, reset bool) (netip.AddrPort, error)
	// NewService declares a service port with its affinity and affinity
	// timeout (0: DefaultAffinityTimeout).
	NewService(svc ServicePortName, affinity AffinityType, ttl time.Duration) error
	// DeleteService forgets the service port.
	DeleteService(svc ServicePortName)
	// CleanupStaleStickySessions drops the expired affinity records.
	CleanupStaleStickySessions(svc ServicePortName)
	// ServiceHasEndpoints reports whether svc has at least one endpoint.
	ServiceHasEndpoints(svc ServicePortName) bool
}
