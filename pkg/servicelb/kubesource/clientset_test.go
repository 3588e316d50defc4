package kubesource

import "k8s.io/client-go/kubernetes"

// clientset is a Client on client-go's clientset (its fake in tests).
type clientset struct{ cs kubernetes.Interface }

func (c clientset) Services(ns string) ServiceAPI { return c.cs.CoreV1().Services(ns) }

func (c clientset) EndpointSlices(ns string) SliceAPI { return c.cs.DiscoveryV1().EndpointSlices(ns) }

func (c clientset) Pods(ns string) PodAPI { return c.cs.CoreV1().Pods(ns) }

func (c clientset) Events(ns string) EventAPI { return c.cs.CoreV1().Events(ns) }
