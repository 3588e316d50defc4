package kubesource

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
)

// NewClient returns a Client of the API server that cfg names, with a
// scheme of core/v1 and discovery/v1 only.
func NewClient(cfg *rest.Config) (Client, error) {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("core/v1 scheme: %w", err)
	}
	if err := discoveryv1.AddToScheme(s); err != nil {
		return nil, fmt.Errorf("discovery/v1 scheme: %w", err)
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	codecs := serializer.NewCodecFactory(s)
	core, err := restClient(cfg, "/api", corev1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	disc, err := restClient(cfg, "/apis", discoveryv1.SchemeGroupVersion, codecs)
	if err != nil {
		return nil, err
	}
	return restGroups{core: core, disc: disc, params: runtime.NewParameterCodec(s)}, nil
}

func restClient(cfg *rest.Config, path string, gv schema.GroupVersion, codecs serializer.CodecFactory) (*rest.RESTClient, error) {
	c := rest.CopyConfig(cfg)
	c.APIPath, c.GroupVersion = path, &gv
	c.NegotiatedSerializer = codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	rc, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("%s client: %w", gv, err)
	}
	return rc, nil
}

type restGroups struct {
	core, disc *rest.RESTClient
	params     runtime.ParameterCodec
}

func (g restGroups) Services(ns string) ServiceAPI {
	return restServices{resource[*corev1.ServiceList]{g.core, g.params, ns, "services"}}
}

func (g restGroups) EndpointSlices(ns string) SliceAPI {
	return restSlices{resource[*discoveryv1.EndpointSliceList]{g.disc, g.params, ns, "endpointslices"}}
}

func (g restGroups) Pods(ns string) PodAPI {
	return restPods{resource[*corev1.PodList]{g.core, g.params, ns, "pods"}}
}

func (g restGroups) Events(ns string) EventAPI {
	return restEvents{resource[*corev1.EventList]{g.core, g.params, ns, "events"}}
}

// resource is one namespaced resource (all namespaces when ns is empty).
type resource[L runtime.Object] struct {
	c      *rest.RESTClient
	params runtime.ParameterCodec
	ns     string
	name   string
}

func (r resource[L]) req(verb string) *rest.Request {
	return r.c.Verb(verb).NamespaceIfScoped(r.ns, r.ns != "").Resource(r.name)
}

func (r resource[L]) list(ctx context.Context, opts metav1.ListOptions, into L) (L, error) {
	err := r.req("GET").VersionedParams(&opts, r.params).Do(ctx).Into(into)
	return into, err
}

func (r resource[L]) Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	return r.req("GET").VersionedParams(&opts, r.params).Watch(ctx)
}

type restServices struct {
	resource[*corev1.ServiceList]
}

func (r restServices) List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error) {
	return r.list(ctx, opts, &corev1.ServiceList{})
}

type restSlices struct {
	resource[*discoveryv1.EndpointSliceList]
}

func (r restSlices) List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error) {
	return r.list(ctx, opts, &discoveryv1.EndpointSliceList{})
}

func (r restSlices) Get(ctx context.Context, name string, opts metav1.GetOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := r.req("GET").Name(name).VersionedParams(&opts, r.params).Do(ctx).Into(out)
	return out, err
}

func (r restSlices) Create(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.CreateOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := r.req("POST").VersionedParams(&opts, r.params).Body(s).Do(ctx).Into(out)
	return out, err
}

func (r restSlices) Update(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error) {
	out := &discoveryv1.EndpointSlice{}
	err := r.req("PUT").Name(s.Name).VersionedParams(&opts, r.params).Body(s).Do(ctx).Into(out)
	return out, err
}

func (r restSlices) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	return r.req("DELETE").Name(name).Body(&opts).Do(ctx).Error()
}

type restPods struct {
	resource[*corev1.PodList]
}

func (r restPods) List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error) {
	return r.list(ctx, opts, &corev1.PodList{})
}

type restEvents struct {
	resource[*corev1.EventList]
}

func (r restEvents) Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := r.req("POST").VersionedParams(&opts, r.params).Body(e).Do(ctx).Into(out)
	return out, err
}

func (r restEvents) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error) {
	out := &corev1.Event{}
	err := r.req("PATCH").Name(name).SubResource(subresources...).SetHeader("Content-Type", string(pt)).
		VersionedParams(&opts, r.params).Body(data).Do(ctx).Into(out)
	return out, err
}
