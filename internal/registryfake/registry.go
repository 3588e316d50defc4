// Package registryfake is the project's one in-memory NSM registry for
// tests: it registers network services and endpoints, serves Find with or
// without a watch, and lets a test take it down (every call fails and the
// open watches break), make it forget everything (a restarted in-memory
// registry) or lose a delete (an endpoint gone without an event). It
// imports only the registry API, so that no test dependency reaches a
// product binary.
package registryfake

import (
	"errors"
	"sync"
	"time"

	registryapi "github.com/networkservicemesh/api/pkg/api/registry"
)

// ErrDown is the error of every call while the registry is down.
var ErrDown = errors.New("registry is down")

// Option configures a Registry.
type Option func(*Registry)

// WithExpiry makes the registry grant each endpoint registration d from
// the time of the call, as a registry with a short expiration does, in
// place of the expiration the endpoint asks for.
func WithExpiry(d time.Duration) Option { return func(r *Registry) { r.expiry = d } }

// RequireServices makes the registry refuse an endpoint whose network
// services are not registered.
func RequireServices() Option { return func(r *Registry) { r.requireServices = true } }

// RefuseDeadlines makes the registry refuse an endpoint registration whose
// context carries a deadline: NSM's expire element would take it off the
// granted expiration.
func RefuseDeadlines() Option { return func(r *Registry) { r.refuseDeadlines = true } }

// Registry is an in-memory NSM registry. It is the endpoint registry client
// itself (Register, Find, Unregister); Services is its network service
// registry client. Safe for concurrent use.
type Registry struct {
	expiry          time.Duration
	requireServices bool
	refuseDeadlines bool

	mu       sync.Mutex
	down     bool
	services map[string]bool
	nses     map[string]*registryapi.NetworkServiceEndpoint
	watchers []*stream
	counts   Counts
}

// Counts are the calls the registry has received.
type Counts struct {
	// EndpointRegisters counts the endpoint Register calls, failed ones
	// included.
	EndpointRegisters int
	// Unregisters counts the endpoint Unregister calls, failed ones
	// included.
	Unregisters int
	// Watches counts the Find calls that opened a watch.
	Watches int
}

// New returns an empty registry, up.
func New(opts ...Option) *Registry {
	r := &Registry{services: map[string]bool{}, nses: map[string]*registryapi.NetworkServiceEndpoint{}}
	for _, o := range opts {
		o(r)
	}
	return r
}

// SetDown takes the registry down (every call fails with ErrDown, the open
// watches break) or brings it back with what it held.
func (r *Registry) SetDown(down bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.down = down
	if down {
		for _, w := range r.watchers {
			w.breakStream()
		}
		r.watchers = nil
	}
}

// Forget drops every network service and endpoint without telling the
// watchers, as a restarted in-memory registry has forgotten them.
func (r *Registry) Forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.services = map[string]bool{}
	r.nses = map[string]*registryapi.NetworkServiceEndpoint{}
}

// LoseDelete removes endpoint name without telling the watchers, as a
// delete that a watch never delivered.
func (r *Registry) LoseDelete(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.nses, name)
}

// Put stores nse, down or not, and tells the open watches (none while
// down): a registration that reached the registry through another NSMgr.
func (r *Registry) Put(nse *registryapi.NetworkServiceEndpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.nses[nse.GetName()] = nse.Clone()
	r.broadcast(&registryapi.NetworkServiceEndpointResponse{NetworkServiceEndpoint: nse.Clone()})
}

// Registered reports whether endpoint name is registered and not expired.
func (r *Registry) Registered(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	nse, ok := r.nses[name]
	if !ok {
		return false
	}
	exp := nse.GetExpirationTime()
	return exp == nil || time.Now().Before(exp.AsTime())
}

// Counts returns the calls received so far.
func (r *Registry) Counts() Counts {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.counts
}
