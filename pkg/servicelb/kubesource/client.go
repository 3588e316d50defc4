package kubesource

import (
	"fmt"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	discoveryv1client "k8s.io/client-go/kubernetes/typed/discovery/v1"
	"k8s.io/client-go/rest"
)

// Client is the part of the Kubernetes API the source and the publisher
// use. kubernetes.Interface (and its fake) has it; NewClient builds one
// from these two groups only: the whole clientset would link every API
// group's client into the proxy (its binary measured 31 MB without, 67 MB
// with the clientset, see docs/servicelb.md).
type Client interface {
	CoreV1() corev1client.CoreV1Interface
	DiscoveryV1() discoveryv1client.DiscoveryV1Interface
}

// NewClient returns a Client of the API server that cfg names.
func NewClient(cfg *rest.Config) (Client, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("core/v1 client: %w", err)
	}
	disc, err := discoveryv1client.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("discovery/v1 client: %w", err)
	}
	return groups{core, disc}, nil
}

type groups struct {
	core *corev1client.CoreV1Client
	disc *discoveryv1client.DiscoveryV1Client
}

func (g groups) CoreV1() corev1client.CoreV1Interface                { return g.core }
func (g groups) DiscoveryV1() discoveryv1client.DiscoveryV1Interface { return g.disc }
