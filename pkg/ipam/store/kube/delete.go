package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// Removed counts the objects DeleteTrench removed.
type Removed struct {
	Pools, Blocks int
}

// DeleteTrench removes every IPAMBlock and then every IPAMPool of the
// trench of o, those that no index names included, each at the version it
// was listed with. It is for a trench that is gone: no replica may serve it
// meanwhile (the caller holds the replicas' Lease). Blocks go first, so
// that a run cut short leaves pools whose index covers every block left,
// as a commit does; running it again finishes the work.
func DeleteTrench(ctx context.Context, o Options) (Removed, error) {
	var r Removed
	o, err := o.withDefaults()
	if err != nil {
		return r, err
	}
	s := &Store{o: o}
	if r.Blocks, err = s.deleteAll(ctx, BlockResource); err != nil {
		return r, err
	}
	r.Pools, err = s.deleteAll(ctx, PoolResource)
	return r, err
}

// deleteAll deletes the trench's objects of gvr and returns how many.
func (s *Store) deleteAll(ctx context.Context, gvr schema.GroupVersionResource) (int, error) {
	type victim struct{ name, rv string }
	var victims []victim
	err := s.list(ctx, gvr, func(u *unstructured.Unstructured) error {
		// The label is the trench's name or a hash of it: the spec says
		// which trench it is.
		if trench, _, _ := unstructured.NestedString(u.Object, "spec", "trench"); trench == s.o.Trench {
			victims = append(victims, victim{u.GetName(), u.GetResourceVersion()})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, v := range victims {
		cctx, cancel := context.WithTimeout(ctx, s.o.WriteTimeout)
		err := s.resource(gvr).Delete(cctx, v.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &v.rv}})
		cancel()
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return n, fmt.Errorf("delete %s %s: %w", gvr.Resource, v.name, err)
		default:
			n++
		}
	}
	return n, nil
}
