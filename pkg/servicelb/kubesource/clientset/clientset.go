// Package clientset adapts client-go's typed clientset (its fake, in
// tests) to kubesource.Client. The proxy does not link it: the typed
// clients register every API group's types (kubesource.NewClient builds
// the proxy's client on the two groups it reads).
package clientset

import (
	"k8s.io/client-go/kubernetes"

	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
)

// New returns cs as a kubesource.Client.
func New(cs kubernetes.Interface) kubesource.Client { return client{cs} }

type client struct{ cs kubernetes.Interface }

func (c client) Services(ns string) kubesource.ServiceAPI { return c.cs.CoreV1().Services(ns) }

func (c client) EndpointSlices(ns string) kubesource.SliceAPI {
	return c.cs.DiscoveryV1().EndpointSlices(ns)
}

func (c client) Pods(ns string) kubesource.PodAPI { return c.cs.CoreV1().Pods(ns) }

func (c client) Events(ns string) kubesource.EventAPI { return c.cs.CoreV1().Events(ns) }
