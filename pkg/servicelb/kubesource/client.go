package kubesource

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

// Client is the part of the Kubernetes API the source and the publisher
// use. The typed clients of client-go have these methods
// (clientset.CoreV1().Services, Pods, Events,
// clientset.DiscoveryV1().EndpointSlices: package clientset adapts one);
// NewClient builds one on a REST client that knows these two groups only:
// client-go's typed clients register every API group's types, which took
// the proxy's binary from 31.0 MB to 66.6 MB, where 42.8 MB is what the
// informers and these two groups cost (docs/servicelb.md).
type Client interface {
	Services(namespace string) ServiceAPI
	EndpointSlices(namespace string) SliceAPI
	Pods(namespace string) PodAPI
	Events(namespace string) EventAPI
}

// PodAPI lists and watches Pods (this node's: the targets).
type PodAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.PodList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// EventAPI writes core/v1 Events (on the Services, for what is refused).
type EventAPI interface {
	Create(ctx context.Context, e *corev1.Event, opts metav1.CreateOptions) (*corev1.Event, error)
	Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (*corev1.Event, error)
}

// ServiceAPI lists and watches Services.
type ServiceAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*corev1.ServiceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
}

// SliceAPI reads and writes EndpointSlices.
type SliceAPI interface {
	List(ctx context.Context, opts metav1.ListOptions) (*discoveryv1.EndpointSliceList, error)
	Watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error)
	Get(ctx context.Context, name string, opts metav1.GetOptions) (*discoveryv1.EndpointSlice, error)
	Create(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.CreateOptions) (*discoveryv1.EndpointSlice, error)
	Update(ctx context.Context, s *discoveryv1.EndpointSlice, opts metav1.UpdateOptions) (*discoveryv1.EndpointSlice, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}
