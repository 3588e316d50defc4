package proxyd

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/causeway-net/causeway/pkg/proxy"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Services sources, as NSM_SERVICES_SOURCE names them.
const (
	ServicesFromFile       = "file"
	ServicesFromKubernetes = "kubernetes"
)

// ServicesOn reports whether the service load balancer runs: a services
// file, or the Kubernetes source.
func (c *Config) ServicesOn() bool {
	return c.ServicesFile != "" || c.ServicesSource == ServicesFromKubernetes
}

// ProxyName is the value of service.kubernetes.io/service-proxy-name of
// this conduit's Services: NSM_SERVICES_PROXY_NAME, or
// <conduit>.<trench>.<namespace>.
func (c *Config) ProxyName() string {
	if c.ServicesProxyName != "" {
		return c.ServicesProxyName
	}
	return c.Conduit + "." + c.Trench + "." + c.Namespace
}

// ServicePrefixList parses NSM_SERVICE_PREFIXES.
func (c *Config) ServicePrefixList() ([]netip.Prefix, error) {
	return parsePrefixList(c.ServicePrefixes, servicelb.CheckServicePrefix)
}

// parsePrefixList parses a comma-separated list of prefixes, each checked
// by check (when not nil).
func parsePrefixList(list string, check func(netip.Prefix) error) ([]netip.Prefix, error) {
	var out []netip.Prefix
	var errs []error
	for s := range strings.SplitSeq(list, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			errs = append(errs, fmt.Errorf("%q is not a prefix in CIDR notation", s))
			continue
		}
		if check != nil {
			if err := check(p); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// validateServicesSource checks the settings of the services' source.
func (c *Config) validateServicesSource() []error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, fmt.Errorf("NSM_%s: %s", env, fmt.Sprintf(format, args...)))
	}
	switch c.ServicesSource {
	case ServicesFromFile:
		if c.ServicePrefixes != "" {
			bad("SERVICE_PREFIXES", "is for NSM_SERVICES_SOURCE=kubernetes; the services file has its own 'prefixes'")
		}
		return errs
	case ServicesFromKubernetes:
	default:
		bad("SERVICES_SOURCE", "%q is not %q or %q", c.ServicesSource, ServicesFromFile, ServicesFromKubernetes)
		return errs
	}
	if c.ServicesFile != "" {
		bad("SERVICES_FILE", "%q is set while NSM_SERVICES_SOURCE=kubernetes: the services come from one source; unset one of them", c.ServicesFile)
	}
	if strings.TrimSpace(c.Host) == "" {
		bad("HOST", "the node name is needed by NSM_SERVICES_SOURCE=kubernetes (the targets' pods are this node's; the published EndpointSlices name it)")
	}
	if msgs := validation.IsValidLabelValue(c.ProxyName()); len(msgs) > 0 || c.ProxyName() == "" {
		bad("SERVICES_PROXY_NAME", "%q is not a label value (%s); set NSM_SERVICES_PROXY_NAME", c.ProxyName(), strings.Join(msgs, "; "))
	}
	if _, err := c.ServicePrefixList(); err != nil {
		bad("SERVICE_PREFIXES", "%v", err)
	}
	return errs
}

// VIPPolicy is what a VIP may not be: NSM_CLUSTER_PREFIXES and the
// width bounds.
func (c *Config) VIPPolicy() (proxy.VIPPolicy, error) {
	forbidden, err := parsePrefixList(c.ClusterPrefixes, nil)
	return proxy.VIPPolicy{Forbidden: forbidden, MinPrefixLen4: c.VIPMinPrefixLength4, MinPrefixLen6: c.VIPMinPrefixLength6}, err
}

// EndpointPrefixList parses NSM_ENDPOINT_PREFIXES.
func (c *Config) EndpointPrefixList() ([]netip.Prefix, error) {
	return parsePrefixList(c.EndpointPrefixes, nil)
}
