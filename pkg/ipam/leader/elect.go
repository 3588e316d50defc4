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
	// OnNewLeader, if set, is called with the identity in the Lease each
	// time it changes (a Forwarder's SetLeader).
	OnNewLeader func(identity string)
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
// until the first of: the renew deadline passes since the last renewal was
// sent (then it serves again if a renewal succeeds in time), the lead is
// lost, the store is fenced (then it loads again if it still leads), ctx
// ends. At the end of ctx the engine is closed (its leases flushed)
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
	lock := &renewals{identity: cfg.Identity, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Name: cfg.LeaseName, Namespace: cfg.Namespace},
		Client:     cfg.Leases,
		LockConfig: resourcelock.ResourceLockConfig{Identity: cfg.Identity},
	}}
	r := &term{cfg: cfg, cancel: cancel, lock: lock, renew: renew, watch: min(50*time.Millisecond, renew/10)}
	started := make(chan context.Context, 1)
	lec := leaderelection.LeaderElectionConfig{
		Lock:          lock,
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
				if cfg.OnNewLeader != nil {
					cfg.OnNewLeader(id)
				}
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
	lock   *renewals
	renew  time.Duration // the renew deadline
	watch  time.Duration // how often the renewals are looked at

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
// again after each fencing or late renewal, until the lead is lost or ctx
// ends. It serves only while its last renewal is younger than the renew
// deadline (see renewals).
func (r *term) lead(ctx, lctx context.Context) {
	log := r.cfg.Logger.With("identity", r.cfg.Identity)
	start := time.Now()
	log.Info("leading: loading the IPAM store")
	for r.waitFresh(ctx, lctx) {
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
		if r.lock.fresh(r.renew) {
			r.cfg.Gate.Open(e)
			log.Info("serving", "since_leading", time.Since(start).String())
			why := r.serve(ctx, lctx, st)
			r.cfg.Gate.Shut()
			log.Info("stopped serving", "reason", why)
		}
		e.Close()
		if err := st.Close(); err != nil {
			log.Error("closing the IPAM store", "error", err)
		}
		start = time.Now()
	}
}

// serve returns why the engine on st must stop serving.
func (r *term) serve(ctx, lctx context.Context, st *kube.Store) string {
	t := time.NewTicker(r.watch)
	defer t.Stop()
	for {
		select {
		case <-lctx.Done():
			return "lead lost"
		case <-ctx.Done():
			return "stopping"
		case <-st.Fenced():
			return "store fenced"
		case <-t.C:
			if !r.lock.fresh(r.renew) {
				return "no renewal within the renew deadline"
			}
		}
	}
}

// waitFresh waits until the Lease was renewed within the renew deadline;
// false when the lead is lost or ctx ends first.
func (r *term) waitFresh(ctx, lctx context.Context) bool {
	t := time.NewTicker(r.watch)
	defer t.Stop()
	for !r.lock.fresh(r.renew) {
		select {
		case <-t.C:
		case <-lctx.Done():
			return false
		case <-ctx.Done():
			return false
		}
	}
	return lctx.Err() == nil && ctx.Err() == nil
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
