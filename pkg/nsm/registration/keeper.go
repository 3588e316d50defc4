package registration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/causeway-net/causeway/internal/backoff"
)

// Registrar is what the keeper registers through: the SDK's registry
// clients to the NSMgr. Service may be nil when the endpoint's network
// service is registered by someone else.
type Registrar struct {
	Service  registry.NetworkServiceRegistryClient
	Endpoint registry.NetworkServiceEndpointRegistryClient
}

// Keeper keeps one endpoint registered until Stop.
type Keeper struct {
	reg  Registrar
	ns   *registry.NetworkService
	nse  *registry.NetworkServiceEndpoint
	opts *options

	mu         sync.Mutex
	granted    *registry.NetworkServiceEndpoint // as last accepted
	registered bool

	// serviceTakenOnce logs the first refusal of the network service.
	serviceTakenOnce sync.Once

	cancel   context.CancelFunc
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// Start registers ns (if not nil) and nse, retrying for up to the first
// timeout, and then keeps them registered in a goroutine of its own until
// Stop. ctx bounds only the first registration. With WithoutFirstWait,
// Start returns at once and the first registration is retried in that
// goroutine, without end, like a refresh.
func Start(ctx context.Context, reg Registrar, ns *registry.NetworkService, nse *registry.NetworkServiceEndpoint, opts ...Option) (*Keeper, error) {
	if reg.Endpoint == nil || nse.GetName() == "" {
		return nil, errors.New("registration: an endpoint registry client and an endpoint name are required")
	}
	if ns != nil && reg.Service == nil {
		return nil, errors.New("registration: a network service needs a network service registry client")
	}
	k := &Keeper{reg: reg, ns: ns, nse: nse.Clone(), opts: newOptions(opts), done: make(chan struct{})}
	pending := k.opts.firstTimeout <= 0
	if !pending {
		if err := k.first(ctx); err != nil {
			close(k.done)
			return nil, err
		}
	}
	life, cancel := context.WithCancel(context.WithoutCancel(ctx))
	k.cancel = cancel
	go func() {
		defer close(k.done)
		k.run(life, pending)
	}()
	return k, nil
}

// first registers for the first time. Its tries carry no deadline (see
// WithTryTimeout): ctx and the first timeout end them by cancellation.
func (k *Keeper) first(parent context.Context) error {
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer cancel()
	stopParent := context.AfterFunc(parent, cancel)
	defer stopParent()
	stop := time.AfterFunc(k.opts.firstTimeout, cancel)
	defer stop.Stop()
	wait := backoff.New(k.opts.retryInitial, k.opts.retryMax)
	for {
		err := k.try(ctx)
		if err == nil {
			return nil
		}
		k.opts.logger.Warn("registration failed, retrying", "nse", k.nse.GetName(), "error", err)
		if !wait.Wait(ctx) {
			return fmt.Errorf("register endpoint %s for %v: %w", k.nse.GetName(), k.nse.GetNetworkServiceNames(), err)
		}
	}
}

// run refreshes at a third of the granted lifetime and, after a failure,
// retries with backoff until a try succeeds. With pending, the first
// registration is still to be made: it tries at once.
func (k *Keeper) run(ctx context.Context, pending bool) {
	wait := backoff.New(k.opts.retryInitial, k.opts.retryMax)
	failures := 0
	for {
		next := k.refreshIn()
		switch {
		case pending:
			next, pending = 0, false
		case failures > 0:
			next = wait.Next()
		}
		if !backoff.Sleep(ctx, next) {
			return
		}
		err := k.try(ctx)
		switch {
		case ctx.Err() != nil:
			return
		case err == nil && failures > 0:
			k.opts.logger.Info("registration restored", "nse", k.nse.GetName(), "failedTries", failures, "expires", k.expires())
			failures = 0
			wait.Reset()
		case err == nil:
			k.opts.logger.Debug("registration refreshed", "nse", k.nse.GetName(), "expires", k.expires())
		case failures == 0:
			failures++
			k.opts.logger.Warn("registration refresh failed, retrying until it succeeds", "nse", k.nse.GetName(), "error", err)
		default: // said at the first failure; its end says how many
			failures++
			k.opts.logger.Debug("registration refresh failed again", "nse", k.nse.GetName(), "failedTries", failures, "error", err)
		}
	}
}

// refreshIn is a third of what is left of the granted registration.
func (k *Keeper) refreshIn() time.Duration {
	exp := k.expires()
	if exp.IsZero() {
		return k.opts.retryMax
	}
	return max(time.Until(exp)/3, k.opts.minRefresh)
}

// expires is the expiration the registry last granted (zero if none).
func (k *Keeper) expires() time.Time {
	k.mu.Lock()
	defer k.mu.Unlock()
	if exp := k.granted.GetExpirationTime(); exp != nil {
		return exp.AsTime()
	}
	return time.Time{}
}

// try registers the service and the endpoint once, bounded by the try
// timeout through cancellation.
func (k *Keeper) try(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := time.AfterFunc(k.opts.tryTimeout, cancel)
	defer stop.Stop()
	if k.ns != nil {
		if err := k.registerService(ctx); err != nil {
			k.set(nil)
			return err
		}
	}
	granted, err := k.reg.Endpoint.Register(ctx, k.nse.Clone())
	if err != nil {
		k.set(nil)
		return fmt.Errorf("register endpoint %s: %w", k.nse.GetName(), err)
	}
	k.set(granted)
	return nil
}

// registerService registers the network service. A refusal
// (PermissionDenied) means that the registry's policy keeps the service to
// the identity that registered it first, as NSM's does: with SPIFFE IDs
// per pod, the same service of every proxy of a DaemonSet or every LB of a
// conduit is registered by its first pod only. The service then exists, and
// the endpoint is registered all the same (logged once per keeper); if it
// did not, the endpoint's registration fails and is retried.
func (k *Keeper) registerService(ctx context.Context) error {
	_, err := k.reg.Service.Register(ctx, k.ns.Clone())
	if err == nil || status.Code(err) != codes.PermissionDenied {
		if err != nil {
			return fmt.Errorf("register network service %s: %w", k.ns.GetName(), err)
		}
		return nil
	}
	k.serviceTakenOnce.Do(func() {
		k.opts.logger.Info("the registry keeps the network service to the workload that registered it first; registering the endpoint only",
			"networkService", k.ns.GetName(), "endpoint", k.nse.GetName(), "reason", err.Error())
	})
	return nil
}

// set records the outcome of a try and reports a change.
func (k *Keeper) set(granted *registry.NetworkServiceEndpoint) {
	k.mu.Lock()
	was := k.registered
	k.registered = granted != nil
	if granted != nil {
		k.granted = granted
	}
	now := k.registered
	k.mu.Unlock()
	if was != now {
		k.opts.onChange(now)
	}
}

// Registered reports whether the last try succeeded.
func (k *Keeper) Registered() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.registered
}

// Endpoint is the endpoint as the registry last accepted it.
func (k *Keeper) Endpoint() *registry.NetworkServiceEndpoint {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.granted.Clone()
}

// Abandon ends the refreshes and waits for the keeper's goroutine, without
// unregistering: the registration runs out as a crashed owner's would.
func (k *Keeper) Abandon() {
	k.cancel()
	<-k.done
}

// Stop ends the refreshes, waits for the keeper's goroutine and then
// unregisters the endpoint (bounded by ctx); an endpoint the registry never
// accepted has nothing to withdraw. It is idempotent.
func (k *Keeper) Stop(ctx context.Context) error {
	k.stopOnce.Do(func() {
		k.Abandon()
		nse := k.Endpoint()
		if nse == nil {
			k.opts.logger.Debug("never registered: nothing to unregister", "nse", k.nse.GetName())
			return
		}
		if _, err := k.reg.Endpoint.Unregister(ctx, nse); err != nil {
			k.stopErr = fmt.Errorf("unregister endpoint %s: %w", k.nse.GetName(), err)
		}
	})
	return k.stopErr
}
