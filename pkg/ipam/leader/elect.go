package leader

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	coordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/store/kube"
)

// Config configures Elect.
type Config struct {
	// Leases and Records reach the API server: the Lease, and the records
	// (pkg/ipam/store/kube).
	Leases  coordinationv1.LeasesGetter
	Records dynamic.Interface
	// Namespace holds the Lease and the records.
	Namespace string
	// LeaseName is the Lease the replicas share; Identity is this replica's
	// name in it.
	LeaseName, Identity string
	// LeaseDuration: the Lease is another replica's to take this long after
	// its last renewal. A leader stops serving when it has not renewed for
	// two thirds of it.
	LeaseDuration time.Duration
	// Engine configures the engine of each term (its Trench is the store's).
	Engine ipam.Config
	// Gate is where the engine serves.
	Gate *Gate
	// Retry is the pause after a failed load of the store (default 1s).
	Retry time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Timings returns the renew deadline and retry period of a lease duration:
// two thirds and a fifth of it.
func Timings(d time.Duration) (renew, retry time.Duration) {
	return d * 2 / 3, d / 5
}

// Elect takes part in the election until ctx ends. While this replica
// leads, it loads the store into an engine and serves it through the Gate,
// until the first of: the lead is lost (the renew deadline passed without a
// renewal), the store is fenced (then it loads again if it still leads),
// ctx ends. At the end of ctx the engine is closed (its leases flushed)
// before the Lease is released, so that the next leader loads everything.
func Elect(ctx context.Context, cfg Config) error {
	if cfg.Retry <= 0 {
		cfg.Retry = time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	renew, retry := Timings(cfg.LeaseDuration)
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	r := &term{cfg: cfg, cancel: cancel}
	started := make(chan context.Context, 1)
	lec := leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: cfg.Namespace},
			Client:     cfg.Leases,
			LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
		},
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: renew, RetryPeriod: retry,
		ReleaseOnCancel: true, Name: "causeway-ipam",
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				select {
				case started <- lctx:
				default:
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(id string) {
				cfg.Logger.Info("IPAM leader", "leader", id, "self", id == cfg.Identity)
			},
		},
	}
	if _, err := leaderelection.NewLeaderElector(lec); err != nil {
		return fmt.Errorf("leader election: %w", err)
	}

	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		r.serveTerms(ctx, ectx, started)
	}()
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
			r.stopWhenIdle()
		case <-ectx.Done():
		}
	}()
	for ectx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(lec)
		if err != nil {
			cancel()
			wg.Wait()
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ectx)
	}
	wg.Wait()
	return nil
}

// term runs the engine while this replica leads.
type term struct {
	cfg    Config
	cancel context.CancelFunc // ends the election (and releases the Lease)

	mu      sync.Mutex
	leading bool
}

// serveTerms serves each term of leadership in turn.
func (r *term) serveTerms(ctx, ectx context.Context, started <-chan context.Context) {
	for {
		select {
		case lctx := <-started:
			r.mu.Lock()
			r.leading = true
			r.mu.Unlock()
			r.lead(ctx, lctx)
			r.mu.Lock()
			r.leading = false
			r.mu.Unlock()
			if ctx.Err() != nil {
				r.cancel()
			}
		case <-ectx.Done():
			return
		}
	}
}

// stopWhenIdle ends the election now if no term is being served (a term
// that is ends it when its engine is closed).
func (r *term) stopWhenIdle() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.leading {
		r.cancel()
	}
}

// lead serves one term: it loads the store into an engine and serves it,
// again after each fencing, until the lead is lost or ctx ends.
func (r *term) lead(ctx, lctx context.Context) {
	log := r.cfg.Logger.With("identity", r.cfg.Identity)
	start := time.Now()
	log.Info("leading: loading the IPAM store")
	for lctx.Err() == nil && ctx.Err() == nil {
		st, e, err := r.open(lctx)
		if err != nil {
			log.Error("cannot load the IPAM store; refusing calls and retrying", "error", err)
			select {
			case <-time.After(r.cfg.Retry):
			case <-lctx.Done():
			case <-ctx.Done():
			}
			continue
		}
		r.cfg.Gate.Open(e)
		log.Info("serving", "since_leading", time.Since(start).String())
		why := "lead lost"
		select {
		case <-lctx.Done():
		case <-ctx.Done():
			why = "stopping"
		case <-st.Fenced():
			why = "store fenced"
		}
		r.cfg.Gate.Shut()
		e.Close()
		if err := st.Close(); err != nil {
			log.Error("closing the IPAM store", "error", err)
		}
		log.Info("stopped serving", "reason", why)
		start = time.Now()
	}
}

// open loads the store and an engine on it.
func (r *term) open(ctx context.Context) (*kube.Store, *ipam.Engine, error) {
	st, err := kube.Open(ctx, kube.Options{
		Client: r.cfg.Records, Namespace: r.cfg.Namespace, Trench: r.cfg.Engine.Trench,
		Identity: r.cfg.Identity, Logger: r.cfg.Logger,
	})
	if err != nil {
		return nil, nil, err
	}
	e, err := ipam.New(ctx, st, r.cfg.Engine)
	if err != nil {
		return nil, nil, errors.Join(err, st.Close())
	}
	return st, e, nil
}
