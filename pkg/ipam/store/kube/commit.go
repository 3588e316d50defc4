package kube

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// write is one API call and what to record in the state when it succeeds
// (with the object's new resourceVersion).
type write struct {
	do   func(ctx context.Context) (string, error)
	done func(rv string)
}

// commit writes a change in steps, each waiting for the one before: removed
// blocks, removed pools, the pools' new content, the blocks' new content.
// It is called with s.mu held.
func (s *Store) commit(ctx context.Context, c *change) error {
	var dels, poolDels, pools, blocks []write
	for _, d := range c.deletes {
		w := s.deleteWrite(d)
		if d.resource == poolKind {
			poolDels = append(poolDels, w)
		} else {
			dels = append(dels, w)
		}
	}
	for f, dirty := range c.dirtyPool {
		if p := c.pools[f]; dirty && p != nil {
			pools = append(pools, s.poolWrite(p))
		}
	}
	for f, ids := range c.dirty {
		for id := range ids {
			if b := c.blocks[f][id]; b != nil {
				blocks = append(blocks, s.blockWrite(b))
			}
		}
	}
	if len(blocks) > 0 && !s.leasesKept {
		if err := s.checkLeasesKept(ctx); err != nil {
			return err
		}
		s.leasesKept = true
	}
	for _, step := range [][]write{dels, poolDels, pools, blocks} {
		if err := s.run(ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// run makes the writes of one step, up to Options.Parallel at a time, and
// records the successful ones; it returns the failures (fenced if one of
// them says the object changed under the store).
func (s *Store) run(ctx context.Context, ws []write) error {
	rvs := make([]string, len(ws))
	errs := make([]error, len(ws))
	call := func(i int) {
		cctx, cancel := context.WithTimeout(ctx, s.o.WriteTimeout)
		defer cancel()
		s.writes.Add(1)
		rvs[i], errs[i] = ws[i].do(cctx)
	}
	if len(ws) == 1 {
		call(0)
	} else {
		sem := make(chan struct{}, s.o.Parallel)
		var wg sync.WaitGroup
		for i := range ws {
			sem <- struct{}{}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer func() { <-sem }()
				call(i)
			}()
		}
		wg.Wait()
	}
	var failed error
	for i, w := range ws {
		if errs[i] == nil {
			w.done(rvs[i])
			continue
		}
		if err := s.fence(errs[i]); errors.Is(err, ErrFenced) || failed == nil {
			failed = err
		}
	}
	return failed
}

func (s *Store) resource(gvr schema.GroupVersionResource) resourceClient {
	return s.o.Client.Resource(gvr).Namespace(s.o.Namespace)
}

// resourceClient is the part of dynamic.ResourceInterface the store uses.
type resourceClient interface {
	Create(ctx context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, sub ...string) (*unstructured.Unstructured, error)
	Update(ctx context.Context, obj *unstructured.Unstructured, opts metav1.UpdateOptions, sub ...string) (*unstructured.Unstructured, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions, sub ...string) error
}

// put creates obj when rv is empty, or updates it at version rv.
func (s *Store) put(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) (string, error) {
	var out *unstructured.Unstructured
	var err error
	if obj.GetResourceVersion() == "" {
		out, err = s.resource(gvr).Create(ctx, obj, metav1.CreateOptions{})
	} else {
		out, err = s.resource(gvr).Update(ctx, obj, metav1.UpdateOptions{})
	}
	if err != nil {
		return "", err
	}
	return out.GetResourceVersion(), nil
}

func (s *Store) poolWrite(p *pool) write {
	return write{
		do: func(ctx context.Context) (string, error) {
			obj, err := p.object(s.o.Namespace, s.o.Trench)
			if err != nil {
				return "", err
			}
			return s.put(ctx, PoolResource, obj)
		},
		done: func(rv string) {
			p.rv = rv
			s.st.families[p.family].pool = p
		},
	}
}

func (s *Store) blockWrite(b *block) write {
	return write{
		do: func(ctx context.Context) (string, error) {
			return s.put(ctx, BlockResource, b.object(s.o.Namespace, s.o.Trench))
		},
		done: func(rv string) {
			b.rv = rv
			s.st.families[b.family].blocks[b.id] = b
			delete(s.st.orphans, b.name)
		},
	}
}

func (s *Store) deleteWrite(d deletion) write {
	gvr := BlockResource
	if d.resource == poolKind {
		gvr = PoolResource
	}
	return write{
		do: func(ctx context.Context) (string, error) {
			rv := d.rv
			return "", s.resource(gvr).Delete(ctx, d.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}})
		},
		done: func(string) {
			fam := s.st.families[d.family]
			if d.resource == poolKind {
				fam.pool = nil
				return
			}
			if b := fam.blocks[d.id]; b != nil && b.name == d.name {
				delete(fam.blocks, d.id)
			}
			delete(s.st.orphans, d.name)
		},
	}
}

// checkLeasesKept makes sure, before the store's first block write, that
// the API server keeps spec.leases: one with the IPAMBlock CRD of an
// earlier version (Helm installs a chart's CRDs but never upgrades them)
// would drop the field and, with it, every address of the block. It
// creates a block with one lease as a dry run (nothing is stored) and
// looks at what the server would have stored.
func (s *Store) checkLeasesKept(ctx context.Context) error {
	probe := &block{name: poolName(s.o.Trench, 4) + "-crd-check", family: 4, id: nodeID{"check", "check"},
		prefix: netip.MustParsePrefix("192.0.2.0/24"), children: map[string]lease{"check": {prefix: netip.MustParsePrefix("192.0.2.1/32")}}}
	cctx, cancel := context.WithTimeout(ctx, s.o.WriteTimeout)
	defer cancel()
	out, err := s.resource(BlockResource).Create(cctx, probe.object(s.o.Namespace, s.o.Trench), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	if err != nil {
		return fmt.Errorf("kube store: check that the API server keeps an IPAMBlock's leases (a dry run): %w", err)
	}
	if leases, _, _ := unstructured.NestedMap(out.Object, "spec", "leases"); len(leases) != 1 {
		return errors.New("kube store: the API server drops spec.leases of an IPAMBlock: the cluster's IPAMBlock CRD is older " +
			"than this IPAM; apply deployments/helm/causeway/crds/ipam.causeway.net.yaml (helm upgrade does not update CRDs). " +
			"Nothing is written until then")
	}
	return nil
}
