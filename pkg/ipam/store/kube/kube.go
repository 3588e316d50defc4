package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/causeway-net/causeway/pkg/ipam/store"
)

// ErrFenced is the error of every Apply after a write found its object
// changed by another writer: the store's view is no longer the server's, so
// nothing may be built on it. Open a new store.
var ErrFenced = errors.New("fenced: another writer changed the IPAM's records")

// Options configure a Store.
type Options struct {
	// Client reaches the API server.
	Client dynamic.Interface
	// Namespace holds the records.
	Namespace string
	// Trench is the only trench whose records are read and written.
	Trench string
	// Identity, if set, is written into the trench's pools at Open (and
	// into pools it creates) as servedBy: the replica that serves.
	Identity string
	// Parallel bounds the API writes in flight in one commit (default 16).
	Parallel int
	// WriteTimeout bounds each API call (default 10s).
	WriteTimeout time.Duration
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

// Store is the Kubernetes store.Store. It is safe for concurrent use;
// commits are serialised.
type Store struct {
	o Options

	mu     sync.Mutex
	st     *state
	fenced error
	closed bool

	fencedCh chan struct{}
	writes   atomic.Uint64
	// leasesKept: the API server was seen to keep an IPAMBlock's leases
	// (checkLeasesKept), so blocks may be written.
	leasesKept bool
}

var _ store.Store = (*Store)(nil)

// Open reads every record of the trench from the API server and, when
// Options.Identity is set, writes it into the trench's pools (which fences
// any replica that served before). A record that cannot be read fails Open:
// the store never serves on a partial view.
func Open(ctx context.Context, o Options) (*Store, error) {
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &Store{o: o, st: newState(o.Trench), fencedCh: make(chan struct{})}
	s.st.identity = o.Identity
	pools, blocks, err := s.read(ctx)
	if err != nil {
		return nil, err
	}
	s.st.adopt(pools, blocks, o.Logger)
	if o.Identity != "" {
		if err := s.claim(ctx); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// withDefaults checks the required options and fills in the others.
func (o Options) withDefaults() (Options, error) {
	if o.Client == nil || o.Namespace == "" || o.Trench == "" {
		return o, errors.New("kube store: client, namespace and trench are required")
	}
	if o.Parallel <= 0 {
		o.Parallel = 16
	}
	if o.WriteTimeout <= 0 {
		o.WriteTimeout = 10 * time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o, nil
}

// read lists and decodes the trench's pools and blocks.
func (s *Store) read(ctx context.Context) ([]*pool, []*block, error) {
	var pools []*pool
	var blocks []*block
	err := s.list(ctx, PoolResource, func(u *unstructured.Unstructured) error {
		p, trench, err := decodePool(u)
		if err == nil && trench == s.o.Trench {
			pools = append(pools, p)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	err = s.list(ctx, BlockResource, func(u *unstructured.Unstructured) error {
		b, trench, err := decodeBlock(u)
		if err == nil && trench == s.o.Trench {
			blocks = append(blocks, b)
		}
		return err
	})
	return pools, blocks, err
}

// list passes every object of the trench's label to f, a page at a time.
func (s *Store) list(ctx context.Context, gvr schema.GroupVersionResource, f func(*unstructured.Unstructured) error) error {
	opts := metav1.ListOptions{LabelSelector: TrenchLabel + "=" + trenchName(s.o.Trench), Limit: 500}
	for {
		cctx, cancel := context.WithTimeout(ctx, s.o.WriteTimeout)
		l, err := s.o.Client.Resource(gvr).Namespace(s.o.Namespace).List(cctx, opts)
		cancel()
		if err != nil {
			return fmt.Errorf("list %s in %s: %w", gvr.Resource, s.o.Namespace, err)
		}
		for i := range l.Items {
			if err := f(&l.Items[i]); err != nil {
				return fmt.Errorf("read %s: %w", gvr.Resource, err)
			}
		}
		if l.GetContinue() == "" {
			return nil
		}
		opts.Continue = l.GetContinue()
	}
}

// claim writes the store's identity into every pool of the trench.
func (s *Store) claim(ctx context.Context) error {
	c := s.st.begin()
	for _, f := range []uint8{4, 6} {
		if p := c.pool(f); p != nil {
			p.servedBy = s.o.Identity
			c.dirtyPool[f] = true
		}
	}
	if err := s.commit(ctx, c); err != nil {
		return fmt.Errorf("claim the pools for %q: %w", s.o.Identity, err)
	}
	return nil
}

// Load returns every record of the trench, in key order, as read at Open
// and changed since by Apply.
func (s *Store) Load(context.Context) ([]store.Record, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fenced != nil {
		return nil, s.fenced
	}
	return s.st.records(), nil
}

// Apply writes ops: one API write per object they change, removed blocks
// first, then the pools, then the other blocks (so that every prefix of
// the writes leaves an index that covers every block). When it fails some
// objects may be written; applying the same ops again is harmless.
func (s *Store) Apply(ctx context.Context, ops []store.Op) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case s.closed:
		return errors.New("kube store: closed")
	case s.fenced != nil:
		return s.fenced
	}
	c := s.st.begin()
	for _, op := range ops {
		if err := c.apply(op); err != nil {
			return fmt.Errorf("kube store: %w", err)
		}
	}
	return s.commit(ctx, c)
}

// Fenced is closed when the store is fenced (see ErrFenced).
func (s *Store) Fenced() <-chan struct{} { return s.fencedCh }

// Writes is the number of API writes attempted so far.
func (s *Store) Writes() uint64 { return s.writes.Load() }

// Close makes later Applies fail. It does not touch the server.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	return nil
}

// fence turns err into ErrFenced when it says the object changed under
// the store (Conflict, AlreadyExists, NotFound), and makes it sticky.
func (s *Store) fence(err error) error {
	if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) && !apierrors.IsNotFound(err) {
		return err
	}
	if s.fenced == nil {
		s.fenced = fmt.Errorf("kube store: %w (%v)", ErrFenced, err)
		close(s.fencedCh)
		s.o.Logger.Warn("IPAM store fenced: a record changed under this replica; it stops serving from this view", "error", err)
	}
	return s.fenced
}
