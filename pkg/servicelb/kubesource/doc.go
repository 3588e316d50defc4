// Package kubesource is the service load balancer's Kubernetes source: it
// owns the proxy's view of the Services it serves and of their endpoints on
// the secondary network, read from the API server with client-go informers,
// and the EndpointSlices this proxy publishes for its own targets.
//
// Reading (Source): an informer on Services carrying the label
// service.kubernetes.io/service-proxy-name=<proxy name> (kube-proxy skips
// Services with that label; the selector is on the list and watch, so only
// these Services are cached), and an informer on the EndpointSlices labelled
// endpointslice.kubernetes.io/managed-by=ManagedBy and carrying the same
// proxy name label (kube-proxy skips those slices too) and NodeLabel of the
// proxy's own node: the endpoints are the node's own targets, the only ones
// its proxy has a path to (another node's targets sit behind that node's
// proxy, on another subnet of the conduit). Each Service becomes
// one servicelb.Service per IP family it has (ipFamilies, clusterIPs); the
// secondary family's is named with the family as suffix (see ModelName).
// Its endpoints are the addresses of the slices of its family whose
// conditions say ready (serving and terminating ones when none is ready;
// all with publishNotReadyAddresses), per service port matched by name and
// protocol.
//
// Sync at the cost of the change: an event on a Service recomputes that
// Service's model and endpoints, an event on a slice recomputes the
// endpoints of its Service only (slices are kept per Service, as
// kube-proxy's change trackers keep them), and each marks whether services
// or only endpoints changed. The delivery to the handlers (the providers'
// full-list OnServiceUpdate / OnEndpointsUpdate) assembles the lists from
// the per-Service results, copying references and recomputing nothing,
// and hands over services only when a Service changed. The providers then
// diff what they get, as they do for the services file.
//
// Calm when the API server is away: the informers keep their caches while
// lists and watches fail; the first failure of an outage is one warning
// and one count (Stats), the first success after it one info line, and the
// reflector's relist then converges the caches (a relist that succeeds is
// the truth: what it no longer holds is gone). Nothing is delivered before
// both caches have synced once, so a proxy that starts while the API server
// is away keeps serving nothing rather than an empty list over what a
// handler already has.
//
// What is refused (a cluster IP outside the prefixes of WithPrefixes, an
// SCTP port, a named target port) is logged and, WithEvents, written as a
// Warning Event on the Service, once per problem while it lasts
// (events.go).
//
// Writing (Publisher): given this proxy's targets (pod, labels, readiness,
// addresses per family) and the Services (Source.Services, for their
// selectors and target ports), it computes one EndpointSlice per Service
// and family for the targets the Service selects, named deterministically
// from the Service, the node and the family, labelled as ours and as this
// node's, and makes the API equal to that with create, update and delete,
// touching only its own slices. Publisher.Run does so at each change of
// its Inputs, retrying failures. The targets come from NodePods: the
// proxy's connections (Conn: the pod name NSM's labels carry, addresses,
// link up) matched to this node's pods, which it caches.
//
// All take a Client (Services, EndpointSlices, Pods, Events); NewClient
// builds one that links two API groups into the proxy, not client-go's
// whole scheme.
package kubesource
