package proxyd

import (
	"context"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/feed"
	"github.com/causeway-net/causeway/pkg/servicelb/provider"
)

// startServices starts the service load balancer (pkg/servicelb/feed) when
// NSM_SERVICES_FILE is set or NSM_SERVICES_SOURCE is kubernetes. It comes
// after the proxy and before the endpoint, so that the first target
// already gets its routes. Off, it removes what a previous run with
// services left in the namespace.
func (d *Daemon) startServices(ctx context.Context) (func() error, error) {
	log := d.log.With("subsystem", "services")
	ns := d.opts.serviceNetNS
	if !d.cfg.ServicesOn() {
		if d.opts.dataplane == nil || ns > 0 {
			if err := provider.CleanupLeftovers(ns); err != nil {
				log.Warn("service load balancer leftovers not removed", "error", err)
			}
		}
		return noStop, nil
	}
	cfg, err := d.servicesConfig()
	if err != nil {
		return nil, err
	}
	lb, stop, err := feed.Start(ctx, cfg, d.proxy, log)
	if err != nil {
		return nil, err
	}
	d.services = lb
	return stop, nil
}

// servicesConfig is the load balancer's configuration from NSM_SERVICE_*
// and NSM_SERVICES_*.
func (d *Daemon) servicesConfig() (feed.Config, error) {
	portRange, err := servicelb.ParsePortRange(d.cfg.ServicePortRange)
	if err != nil {
		return feed.Config{}, err
	}
	cfg := feed.Config{
		Provider: d.cfg.ServiceProvider, NetNS: d.opts.serviceNetNS, SyncPeriod: d.cfg.ServiceSyncPeriod,
		PortRange: portRange, UDPIdleTimeout: d.cfg.ServiceUDPIdleTimeout, File: d.cfg.ServicesFile,
		MaxConnectionsPerClient: d.cfg.ServiceMaxConnectionsPerClient,
	}
	if d.cfg.ServicesSource == ServicesFromKubernetes {
		prefixes, err := d.cfg.ServicePrefixList()
		if err != nil {
			return feed.Config{}, err
		}
		pools, err := d.cfg.EndpointPrefixList()
		if err != nil {
			return feed.Config{}, err
		}
		if len(pools) == 0 {
			d.log.Warn("endpoints are not bounded to the conduit's pools: set NSM_ENDPOINT_PREFIXES (docs/security.md)")
		}
		cfg.File = ""
		cfg.Kube = &feed.Kube{Client: d.opts.kubeClient, Kubeconfig: d.cfg.Kubeconfig,
			ProxyName: d.cfg.ProxyName(), Node: d.cfg.Host, Prefixes: prefixes, Pools: pools,
			MaxServices: d.cfg.ServicesMax, Namespaces: d.cfg.ServicesNamespaces,
			IDScheme: d.targetIDScheme(), TrustDomain: d.creds.TrustDomain}
	}
	return cfg, nil
}
