package feed

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/causeway-net/causeway/internal/kubeclient"
	"github.com/causeway-net/causeway/internal/tasks"
	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
)

// kubeServices is the Kubernetes source of the service load balancer:
// the Source feeding the provider (through kubeFeed), the node's pods,
// and the Publisher of this proxy's targets. The proxy owns the targets
// and their addresses (proxy.Targets); the pods cache owns their pods'
// labels and readiness; the Publisher is given both at each change and
// keeps no copy of its own beyond what it wrote.
type kubeServices struct {
	src       *kubesource.Source
	pods      *kubesource.NodePods
	pub       *kubesource.Publisher
	proxyName string
}

// startKube starts the Source, the pods cache and the Publisher as tasks
// of t.
func (s *LB) startKube(t *tasks.Group, cfg Kube) (*kubeServices, error) {
	client := cfg.Client
	if client == nil {
		var err error
		if client, err = newKubeClient(cfg.Kubeconfig); err != nil {
			return nil, err
		}
	}
	prefixes := cfg.Prefixes
	name, node := cfg.ProxyName, cfg.Node
	log := kubesource.WithLogger(s.log)
	pub, err := kubesource.NewPublisher(client, name, node, log)
	if err != nil {
		return nil, err
	}
	pods, err := kubesource.NewNodePods(client, node, pub.Request, log,
		kubesource.WithTargetIdentity(cfg.IDScheme, cfg.TrustDomain, s.idRefusals))
	if err != nil {
		return nil, err
	}
	feed := &kubeFeed{s: s, prefixes: prefixes}
	src, err := kubesource.New(client, name, node, feed, log, kubesource.WithPrefixes(prefixes), kubesource.WithEndpointPools(cfg.Pools),
		kubesource.WithMaxServices(cfg.MaxServices, s.refusals), kubesource.WithNamespaces(cfg.Namespaces),
		kubesource.WithEvents(node), kubesource.WithServicesChanged(pub.Request))
	if err != nil {
		return nil, err
	}
	k := &kubeServices{src: src, pods: pods, pub: pub, proxyName: name}
	feed.start()
	targets, unwatch := s.proxy.WatchTargets()
	t.Go(src.Run)
	t.Go(pods.Run)
	t.Go(func(ctx context.Context) {
		defer unwatch()
		pub.Run(ctx, kubesource.Inputs{
			Ready:    func() bool { return src.Stats().Synced && pods.Synced() },
			Services: src.Services,
			Targets:  func() []kubesource.Target { return pods.Targets(conns(s.proxy.Targets())) },
			Changed:  targets,
		})
	})
	s.log.Info("services from the API server", "proxyName", name, "node", node, "prefixes", prefixes)
	return k, nil
}

// newKubeClient returns the client of the API server: from kubeconfig, or
// the pod's service account.
func newKubeClient(kubeconfig string) (kubesource.Client, error) {
	cfg, err := kubeclient.Config(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes services source: API server configuration: %w", err)
	}
	return kubesource.NewClient(cfg)
}

// conns are the proxy's target connections as the pods cache matches them.
func conns(ts []proxy.Target) []kubesource.Conn {
	out := make([]kubesource.Conn, 0, len(ts))
	for _, t := range ts {
		out = append(out, kubesource.Conn{Pod: t.Client.Pod, Identity: t.Client.Identity, Addrs: t.Addrs, Up: t.Linked})
	}
	return out
}

// kubeFeed is the Source's handler (called from its one delivering
// goroutine): it hands the provider the model, and the proxy the routes
// its targets need (the configured prefixes, or each service IP's host
// prefix) and the hairpin that the nftables provider needs while there
// are services.
type kubeFeed struct {
	s        *LB
	prefixes []netip.Prefix
}

// start sets the routes known before the first delivery: the configured
// prefixes; without them, the targets keep the routes they carry until
// the services are known.
func (f *kubeFeed) start() {
	if len(f.prefixes) > 0 {
		f.setRoutes(f.prefixes)
		return
	}
	f.s.proxy.HoldServiceRoutes()
	f.s.mu.Lock()
	f.s.held = true
	f.s.mu.Unlock()
}

func (f *kubeFeed) setRoutes(routes []netip.Prefix) {
	f.s.proxy.SetServicePrefixes(routes)
	f.s.mu.Lock()
	f.s.prefixes, f.s.held = routes, false
	f.s.mu.Unlock()
}

// OnServiceUpdate implements servicelb.ServiceHandler.
func (f *kubeFeed) OnServiceUpdate(svcs []servicelb.Service) {
	routes := f.prefixes
	if len(routes) == 0 {
		routes = servicelb.HostPrefixes(svcs)
		slices.SortFunc(routes, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	}
	f.setRoutes(routes)
	f.s.setHairpin(len(svcs))
	f.s.provider.OnServiceUpdate(svcs)
}

// OnEndpointsTriggers implements kubesource.TriggerHandler.
func (f *kubeFeed) OnEndpointsTriggers(triggers []time.Time) { f.s.syncs.handed(triggers) }

// OnEndpointsUpdate implements servicelb.EndpointsHandler.
func (f *kubeFeed) OnEndpointsUpdate(eps []servicelb.Endpoints) { f.s.provider.OnEndpointsUpdate(eps) }

// KubeState is the Kubernetes source in -debug: the Services' and
// slices' informers, this node's pods (with the target connections not
// matched to a pod), and what this node published.
type KubeState struct {
	ProxyName string                    `json:"proxyName"`
	Source    kubesource.Stats          `json:"source"`
	Pods      kubesource.PodsStats      `json:"pods"`
	Published kubesource.PublisherStats `json:"published"`
}

func (k *kubeServices) state() *KubeState {
	return &KubeState{ProxyName: k.proxyName, Source: k.src.Stats(), Pods: k.pods.Stats(), Published: k.pub.Stats()}
}
