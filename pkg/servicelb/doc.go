// Package servicelb owns the model of the service load balancer on the
// secondary network (services, their ports and endpoints, the reference that
// events carry), the user-space round-robin LoadBalancer with ClientIP
// affinity, the proxy PortAllocator, the event Recorder, the rate-limited
// sync runner and the Provider interface that the kernel paths implement
// (sub-packages userspace and nftlb, chosen by provider). Its sources of
// services are the services file (sub-package filesource) and the
// Kubernetes API (sub-package kubesource, not wired into the proxy yet).
package servicelb
