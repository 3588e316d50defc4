package kube

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
)

// fakeAPI is an API server in memory with the semantics the store relies
// on: a create fails if the object exists, an update or a delete with a
// precondition fails with Conflict unless it names the current
// resourceVersion, a missing object is NotFound. (client-go's fake dynamic
// client does not check resourceVersions.) fail, if set, is asked before
// every write.
type fakeAPI struct {
	dynamic.Interface

	mu      sync.Mutex
	objects map[string]*unstructured.Unstructured // by resource/namespace/name
	rv      int
	writes  []string // "verb resource name" of each successful write
	fail    func(verb, resource, name string) error
	// oldCRD drops spec.leases from every IPAMBlock written, as an API
	// server with the IPAMBlock CRD of an earlier version does.
	oldCRD bool
}

func newFakeAPI() *fakeAPI { return &fakeAPI{objects: map[string]*unstructured.Unstructured{}} }

func (f *fakeAPI) Resource(gvr schema.GroupVersionResource) dynamic.NamespaceableResourceInterface {
	return &fakeResource{api: f, res: gvr.Resource}
}

type fakeResource struct {
	dynamic.NamespaceableResourceInterface
	api     *fakeAPI
	res, ns string
}

func (r *fakeResource) Namespace(ns string) dynamic.ResourceInterface {
	return &fakeResource{api: r.api, res: r.res, ns: ns}
}

func (r *fakeResource) key(name string) string { return r.res + "/" + r.ns + "/" + name }

func (r *fakeResource) gr() schema.GroupResource {
	return schema.GroupResource{Group: Group, Resource: r.res}
}

func (r *fakeResource) check(verb, name string) error {
	if r.api.fail != nil {
		return r.api.fail(verb, r.res, name)
	}
	return nil
}

func (r *fakeResource) store(verb string, obj *unstructured.Unstructured) *unstructured.Unstructured {
	r.api.rv++
	c := obj.DeepCopy()
	c.SetResourceVersion(strconv.Itoa(r.api.rv))
	r.api.objects[r.key(obj.GetName())] = c
	r.api.writes = append(r.api.writes, verb+" "+r.res+" "+obj.GetName())
	return c.DeepCopy()
}

func (r *fakeResource) Create(_ context.Context, obj *unstructured.Unstructured, opts metav1.CreateOptions, _ ...string) (*unstructured.Unstructured, error) {
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	obj = r.prune(obj)
	if len(opts.DryRun) > 0 {
		return obj, nil
	}
	if err := r.check("create", obj.GetName()); err != nil {
		return nil, err
	}
	if _, ok := r.api.objects[r.key(obj.GetName())]; ok {
		return nil, apierrors.NewAlreadyExists(r.gr(), obj.GetName())
	}
	return r.store("create", obj), nil
}

func (r *fakeResource) Update(_ context.Context, obj *unstructured.Unstructured, _ metav1.UpdateOptions, _ ...string) (*unstructured.Unstructured, error) {
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	obj = r.prune(obj)
	if err := r.check("update", obj.GetName()); err != nil {
		return nil, err
	}
	cur, ok := r.api.objects[r.key(obj.GetName())]
	if !ok {
		return nil, apierrors.NewNotFound(r.gr(), obj.GetName())
	}
	if cur.GetResourceVersion() != obj.GetResourceVersion() {
		return nil, apierrors.NewConflict(r.gr(), obj.GetName(), errors.New("the object has been modified"))
	}
	return r.store("update", obj), nil
}

func (r *fakeResource) Delete(_ context.Context, name string, opts metav1.DeleteOptions, _ ...string) error {
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	if err := r.check("delete", name); err != nil {
		return err
	}
	cur, ok := r.api.objects[r.key(name)]
	if !ok {
		return apierrors.NewNotFound(r.gr(), name)
	}
	if p := opts.Preconditions; p != nil && p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion() {
		return apierrors.NewConflict(r.gr(), name, errors.New("precondition failed"))
	}
	delete(r.api.objects, r.key(name))
	r.api.writes = append(r.api.writes, "delete "+r.res+" "+name)
	return nil
}

func (r *fakeResource) List(_ context.Context, opts metav1.ListOptions) (*unstructured.UnstructuredList, error) {
	r.api.mu.Lock()
	defer r.api.mu.Unlock()
	k, v, _ := strings.Cut(opts.LabelSelector, "=")
	l := &unstructured.UnstructuredList{}
	for key, obj := range r.api.objects {
		if strings.HasPrefix(key, r.res+"/"+r.ns+"/") && obj.GetLabels()[k] == v {
			l.Items = append(l.Items, *obj.DeepCopy())
		}
	}
	return l, nil
}

// writeLog returns and forgets the writes so far.
func (f *fakeAPI) writeLog() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	w := f.writes
	f.writes = nil
	return w
}

// prune returns a copy of obj as the fake would store it.
func (r *fakeResource) prune(obj *unstructured.Unstructured) *unstructured.Unstructured {
	c := obj.DeepCopy()
	if r.api.oldCRD && r.res == "ipamblocks" {
		unstructured.RemoveNestedField(c.Object, "spec", "leases")
	}
	return c
}
