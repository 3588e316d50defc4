// Package proxyd assembles the proxy daemon: it reads the NSM_* environment,
// and starts and stops the proxy's components (health, dataplane, IPAM and
// NSP clients, the proxy state machine, the full-mesh NSM client, the NSE,
// the VIP source of sub-package vipsource) in a fixed order. cmd/proxy only
// hands Load, Run and Debug to internal/daemon's main; Start returns the
// running Daemon instead, and the Options replace the kernel dataplane, the
// credentials and the NSM gRPC options (for tests).
package proxyd

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/causeway-net/causeway/internal/envload"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/nexthopcheck"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/kubesource"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// Config is the proxy's configuration, read from NSM_* environment
// variables with Meridio's names and defaults; the settings Causeway adds
// carry new names in the same style.
type Config struct {
	Name                  string        `default:"proxy" desc:"pod name: NSE name, NSM client name, prefix of LB connection ids"`
	ServiceName           string        `default:"proxy" desc:"network service served to targets, used as given; Meridio's operator and the Helm chart compose 'proxy.<conduit>.<trench>.<ns>'" split_words:"true"`
	ConnectTo             url.URL       `default:"unix:///var/lib/networkservicemesh/nsm.io.sock" desc:"NSMgr URL" split_words:"true"`
	DialTimeout           time.Duration `default:"5s" desc:"NSMgr dial timeout" split_words:"true"`
	RequestTimeout        time.Duration `default:"15s" desc:"timeout of one NSM request try and of each LB connection close" split_words:"true"`
	MaxTokenLifetime      time.Duration `default:"24h" desc:"lifetime of the proxy's NSM tokens, at least twice NSM_REQUEST_TIMEOUT; half of it is the grace before an LB whose registration expired is evicted" split_words:"true"`
	IPAMService           string        `default:"ipam-service:7777" desc:"IPAM address; the proxy waits for it at start (its bridge addresses); while it cannot be reached or resolved, one warning per outage names it and the reason" envconfig:"IPAM_SERVICE"`
	Host                  string        `default:"" desc:"node name: IPAM node and the NSE's 'nodeName' label"`
	NetworkServiceName    string        `default:"load-balancer" desc:"LB network service of the full mesh, used as given; the Helm chart composes '<conduit>.<trench>.<ns>'" split_words:"true"`
	Namespace             string        `default:"default" desc:"namespace, part of the NSP address"`
	Trench                string        `default:"default" desc:"trench"`
	Conduit               string        `default:"load-balancer" desc:"conduit"`
	NSPServiceName        string        `default:"nsp-service" desc:"NSP address prefix: '<name>-<trench>.<namespace>:<port>'" envconfig:"NSP_SERVICE_NAME"`
	NSPServicePort        int           `default:"7778" desc:"NSP port" envconfig:"NSP_SERVICE_PORT"`
	IPFamily              string        `default:"dualstack" desc:"'ipv4', 'ipv6', anything else is dual-stack" envconfig:"IP_FAMILY"`
	LogLevel              string        `default:"DEBUG" desc:"'TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR'; SIGUSR2 switches to TRACE, SIGUSR1 back" split_words:"true"`
	MTU                   int           `default:"1500" desc:"MTU of the NSM connections (≥ 576 for ipv4, ≥ 1280 otherwise)" envconfig:"MTU"`
	GRPCKeepaliveTime     time.Duration `default:"30s" desc:"keepalive of the IPAM and NSP connections" envconfig:"GRPC_KEEPALIVE_TIME"`
	GRPCProbeRPCTimeout   time.Duration `default:"1s" desc:"RPC timeout of the endpoint's own health probe" envconfig:"GRPC_PROBE_RPC_TIMEOUT"`
	GRPCMaxBackoff        time.Duration `default:"5s" desc:"reconnect backoff cap (IPAM, NSP, VIP watch)" envconfig:"GRPC_MAX_BACKOFF"`
	IPReleaseDelay        time.Duration `default:"20s" desc:"delay before the addresses of a closed connection are released; a reconnect within it keeps them" envconfig:"IP_RELEASE_DELAY"`
	BridgeIPRenewInterval time.Duration `default:"5m" desc:"period of the bridge address lease renewal" envconfig:"BRIDGE_IP_RENEW_INTERVAL"`

	// Settings Causeway adds.

	// LeftoverHold is how long a restarted proxy keeps the kernel state it
	// found beside the one it relearns (see leftovers.go).
	LeftoverHold time.Duration `default:"30s" desc:"new: after a restart, how long the kernel state found (bridge ports, LB nexthops, VIP rules) is kept beside the relearned one once NSM is reachable and the VIPs are known; 0: released then" envconfig:"LEFTOVER_HOLD"`

	// NSPService, when set, is the NSP address used as is instead of the
	// one built from NSPServiceName, Trench, Namespace and NSPServicePort.
	NSPService string `default:"" desc:"new: NSP address used as is, instead of the one built from the three above" envconfig:"NSP_SERVICE"`
	// VIPFile, when set, takes the VIPs from this watched YAML file
	// instead of the NSP (vipsource.FileSource).
	VIPFile        string   `default:"" desc:"new: take the VIPs from this watched YAML file (the 'nsp' format) instead of the NSP; missing or invalid at start, it is waited for (no VIPs known until then); a later deletion or broken edit keeps the last good VIPs (logged)" envconfig:"VIP_FILE"`
	BridgeName     string   `default:"bridge0" desc:"new: bridge name" envconfig:"BRIDGE_NAME"`
	BridgeMACFile  string   `default:"" desc:"new: file that keeps the bridge MAC when the bridge itself is re-created (new pod)" envconfig:"BRIDGE_MAC_FILE"`
	DebugSocket    string   `default:"/tmp/causeway-proxy-debug.sock" desc:"new: where the running proxy serves its state for '-debug'" envconfig:"DEBUG_SOCKET"`
	Table          int      `default:"1" desc:"new: routing table of the ECMP routes and VIP rules" envconfig:"TABLE"`
	HealthSocket   string   `default:"/tmp/health.sock" desc:"new: gRPC health (Startup / Readiness / Liveness) unix socket; 'proxy -probe startup|readiness|liveness' asks it" envconfig:"HEALTH_SOCKET"`
	MetricsAddress string   `default:":9091" desc:"new: Prometheus '/metrics'; empty turns it off; its port is refused to whatever arrives over the bridge (targets, LBs)" envconfig:"METRICS_ADDRESS"`
	Insecure       bool     `default:"false" desc:"new: plain gRPC and unsigned NSM tokens, asked for explicitly, for local use only (warned at start and hourly); otherwise SPIFFE from 'SPIFFE_ENDPOINT_SOCKET'" envconfig:"INSECURE"`
	IPAMServerIDs  []string `desc:"new: comma-separated rules (SPIFFE IDs, or paths in the proxy's trust domain, with path.Match wildcards within a segment) of the IDs the IPAM may have: the proxy refuses the handshake with any other; empty: any SVID the trust bundle verifies" envconfig:"IPAM_SERVER_IDS"`
	NSPServerIDs   []string `desc:"new: the same for the configuration server (NSP)" envconfig:"NSP_SERVER_IDS"`
	IPAMInsecure   bool     `default:"false" desc:"new: plain gRPC toward the IPAM and NSP even when NSM uses SPIFFE (warned at start and hourly)" envconfig:"IPAM_INSECURE"`
	ListenOn       string   `default:"" desc:"new: unix socket of the NSE (default: a fresh temporary directory)" envconfig:"LISTEN_ON"`

	// Service load balancer (docs/servicelb.md): off unless ServicesFile
	// is set or ServicesSource is "kubernetes".
	ServicesSource        string        `default:"file" desc:"new: where the service load balancer's services come from: 'file' (NSM_SERVICES_FILE) or 'kubernetes' (the API server: Services labelled service.kubernetes.io/service-proxy-name with NSM_SERVICES_PROXY_NAME, endpoints from EndpointSlices; docs/servicelb.md)" envconfig:"SERVICES_SOURCE"`
	ServicesFile          string        `default:"" desc:"new: watched YAML file of the service load balancer's services and endpoints (docs/servicelb.md); empty turns it off; not with NSM_SERVICES_SOURCE=kubernetes" envconfig:"SERVICES_FILE"`
	ServicesProxyName     string        `default:"" desc:"new: kubernetes source: the value of the label service.kubernetes.io/service-proxy-name that gives a Service to this conduit; empty: '<conduit>.<trench>.<namespace>' (NSM_CONDUIT, NSM_TRENCH, NSM_NAMESPACE)" envconfig:"SERVICES_PROXY_NAME"`
	ServicePrefixes       string        `default:"" desc:"new: kubernetes source: comma-separated prefixes of the cluster IPs served, routed by the targets to the proxy (cluster IPs outside are refused, with an Event); empty: every cluster IP, each routed as a host prefix" envconfig:"SERVICE_PREFIXES"`
	Kubeconfig            string        `default:"" desc:"new: kubernetes source: kubeconfig file of the API server; empty: the pod's service account (in-cluster)" envconfig:"KUBECONFIG"`
	ServiceProvider       string        `default:"nftables" desc:"new: service load balancer: 'nftables' (DNAT in the kernel) or 'userspace' (a proxy socket per service port)" envconfig:"SERVICE_PROVIDER"`
	ServiceSyncPeriod     time.Duration `default:"30s" desc:"new: period of the service load balancer's full resync" envconfig:"SERVICE_SYNC_PERIOD"`
	ServicePortRange      string        `default:"" desc:"new: userspace provider: ports of its sockets, 'first-last' (empty: the kernel's choice)" envconfig:"SERVICE_PORT_RANGE"`
	ServiceUDPIdleTimeout time.Duration `default:"30s" desc:"new: userspace provider: a UDP flow idle that long ends" envconfig:"SERVICE_UDP_IDLE_TIMEOUT"`

	// Datapath check of the LB nexthops (docs/dataplane.md, "Datapath
	// liveness of the LB nexthops").
	NexthopCheckOff                bool          `default:"false" desc:"new: turns off the datapath check of the LB nexthops (ICMP echo from the bridge; a nexthop that stops answering leaves its family's route, never the last one)" envconfig:"NEXTHOP_CHECK_OFF"`
	NexthopCheckInterval           time.Duration `default:"50ms" desc:"new: time between two echo probes of an LB nexthop, and the time a probe has to be answered (at least 10ms)" envconfig:"NEXTHOP_CHECK_INTERVAL"`
	NexthopCheckFailures           int           `default:"8" desc:"new: probes lost in a row that take an LB nexthop out of its route (detection: this many intervals, plus up to one)" envconfig:"NEXTHOP_CHECK_FAILURES"`
	NexthopCheckSuccesses          int           `default:"5" desc:"new: probes answered in a row, after the hold-down, that put an LB nexthop back" envconfig:"NEXTHOP_CHECK_SUCCESSES"`
	NexthopCheckHoldDown           time.Duration `default:"1s" desc:"new: least time an LB nexthop stays out once it answers again; doubled for each flap, up to 32 times" envconfig:"NEXTHOP_CHECK_HOLD_DOWN"`
	ClusterPrefixes                string        `default:"" desc:"new: comma-separated networks of the cluster and the nodes (pod, service and node networks, the IPAM's pools): a VIP that overlaps one is refused, with an error naming both (loopback, link-local, multicast and unspecified networks always are)" envconfig:"CLUSTER_PREFIXES"`
	VIPMinPrefixLength4            int           `default:"24" desc:"new: the widest IPv4 VIP accepted (a shorter prefix is refused)" envconfig:"VIP_MIN_PREFIX_LENGTH_IPV4"`
	VIPMinPrefixLength6            int           `default:"120" desc:"new: the widest IPv6 VIP accepted (a shorter prefix is refused)" envconfig:"VIP_MIN_PREFIX_LENGTH_IPV6"`
	EndpointPrefixes               string        `default:"" desc:"new: kubernetes source: comma-separated pools of the conduit (the IPAM's): endpoints of EndpointSlices outside them are ignored and logged once (loopback, link-local, multicast and unspecified ones always are); empty: not bounded to pools" envconfig:"ENDPOINT_PREFIXES"`
	TargetIDScheme                 string        `default:"off" desc:"new: kubernetes source: how the SPIFFE ID a target's client proves (the certificate its path token carries, docs/security.md) must name the pod its connection claims before its address is published: pod (/ns/<namespace>/pod/<name>), serviceAccount (/ns/<namespace>/sa/<spec.serviceAccountName>), any (either) or off (the claim is believed; always so in insecure mode)" envconfig:"TARGET_ID_SCHEME"`
	TargetIDs                      []string      `desc:"new: comma-separated rules (as IPAM_SERVER_IDS) of the SPIFFE IDs of the targets that may connect to this conduit: a client whose ID is not proved or matches none is refused (PermissionDenied) before any address is allocated, logged once per client, counted in causeway_proxy_target_identity_refusals_total; empty: any client NSM lets through, with a warning at start (the chart sets the release's namespace by default); ignored in insecure mode" envconfig:"TARGET_IDS"`
	MaxConnectionsPerClient        int           `default:"128" desc:"new: target connections one client (the SPIFFE ID of its path token, else its pod) holds on this proxy; a new one past it is refused (ResourceExhausted), logged once per client, counted in causeway_proxy_limit_refusals_total" envconfig:"MAX_CONNECTIONS_PER_CLIENT"`
	ServicesNamespaces             []string      `default:"" desc:"new: kubernetes source: comma-separated namespaces whose Services this conduit serves (an opt-in list); empty: every namespace" envconfig:"SERVICES_NAMESPACES"`
	ServicesMax                    int           `default:"1000" desc:"new: kubernetes source: Services served by this conduit; one more is not served (logged once, counted in causeway_proxy_service_limit_refusals_total) until a later change of it finds room" envconfig:"SERVICES_MAX"`
	ServiceMaxConnectionsPerClient int           `default:"512" desc:"new: userspace provider: TCP connections one client address holds through the relay; one more is reset (logged once per client, counted)" envconfig:"SERVICE_MAX_CONNECTIONS_PER_CLIENT"`
	PortFilterOff                  bool          `default:"false" desc:"new: leaves the targets' bridge ports unfiltered; by default a target's port may send only from one MAC (the first it uses, never one another port or the bridge uses) and from its own addresses and the VIPs, in ARP, neighbour discovery and IP (an nftables table of the bridge family, docs/security.md)" envconfig:"PORT_FILTER_OFF"`
	TargetCheckInterval            time.Duration `default:"0s" desc:"new: time between two echo probes of a target, for the report only (-debug, metrics, a log line per change; nothing is taken from a target); the other NSM_NEXTHOP_CHECK_* settings apply; 0 turns it off" envconfig:"TARGET_CHECK_INTERVAL"`
}

// TargetCheck is the settings of the datapath check of the targets, and
// whether it is on.
func (c *Config) TargetCheck() (nexthopcheck.Settings, bool) {
	s := c.NexthopCheck()
	s.Interval = c.TargetCheckInterval
	return s, !c.NexthopCheckOff && c.TargetCheckInterval > 0
}

// NexthopCheck is the settings of the datapath check of the LB nexthops.
func (c *Config) NexthopCheck() nexthopcheck.Settings {
	return nexthopcheck.Settings{Off: c.NexthopCheckOff, Interval: c.NexthopCheckInterval,
		FailuresBeforeDown: c.NexthopCheckFailures, SuccessesBeforeUp: c.NexthopCheckSuccesses, HoldDown: c.NexthopCheckHoldDown}
}

// EnvPrefix is the prefix of every proxy environment variable.
const EnvPrefix = "nsm"

// Load reads the configuration from the environment and validates it.
func Load() (*Config, error) {
	var c Config
	if err := envload.Process(EnvPrefix, &c); err != nil {
		return nil, fmt.Errorf("cannot read the NSM_* environment:\n%w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return &c, nil
}

// LogValue renders the configuration in a log line, durations and the
// NSMgr URL as text.
func (c Config) LogValue() slog.Value { return envload.LogValue(&c) }

// Families returns the IP families the proxy serves, IPv4 first.
func (c *Config) Families() []Family {
	switch strings.ToLower(c.IPFamily) {
	case "ipv4":
		return []Family{IPv4}
	case "ipv6":
		return []Family{IPv6}
	default:
		return []Family{IPv4, IPv6}
	}
}

// familyName names the families served, with the setting when it is not
// one of the names (Meridio serves dual-stack then).
func (c *Config) familyName() string {
	switch f := strings.ToLower(c.IPFamily); {
	case !c.FamilyNamed():
		return fmt.Sprintf("dual-stack (NSM_IP_FAMILY=%q is not ipv4, ipv6 or dualstack)", c.IPFamily)
	case f == "dualstack":
		return "dual-stack"
	default:
		return f
	}
}

// FamilyNamed tells whether NSM_IP_FAMILY is one of its names (ipv4, ipv6,
// dualstack); any other value means dual-stack, as in Meridio.
func (c *Config) FamilyNamed() bool {
	f := strings.ToLower(c.IPFamily)
	return f == "ipv4" || f == "ipv6" || f == "dualstack"
}

// SysctlFamilies are the families whose sysctls the dataplane sets and
// checks: those the proxy serves.
func (c *Config) SysctlFamilies() dataplane.SysctlFamilies {
	var f dataplane.SysctlFamilies
	for _, fam := range c.Families() {
		if fam == IPv6 {
			f |= dataplane.SysctlsIPv6
		} else {
			f |= dataplane.SysctlsIPv4
		}
	}
	return f
}

// NSPAddress is the address of the configuration server.
func (c *Config) NSPAddress() string {
	if c.NSPService != "" {
		return c.NSPService
	}
	return fmt.Sprintf("%s-%s.%s:%d", c.NSPServiceName, c.Trench, c.Namespace, c.NSPServicePort)
}

// MetricsPort is the TCP port of the metrics' listener, which the
// Dataplane keeps the targets from (dataplane.Options.GuardedPorts): 0 when
// the metrics are off, or on a port the kernel chooses (":0", tests only:
// it cannot be named before the listener exists, and stays open).
func (c *Config) MetricsPort() (uint16, error) {
	if c.MetricsAddress == "" {
		return 0, nil
	}
	_, port, err := net.SplitHostPort(c.MetricsAddress)
	if err != nil {
		return 0, fmt.Errorf("%q: %w", c.MetricsAddress, err)
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return 0, fmt.Errorf("%q: port %q is not a number from 0 to 65535", c.MetricsAddress, port)
	}
	return uint16(n), nil
}

// Validate checks the configuration and returns every problem found, each
// naming its environment variable.
func (c *Config) Validate() error {
	var errs []error
	bad := func(env, format string, args ...any) {
		errs = append(errs, fmt.Errorf("NSM_%s: %s", env, fmt.Sprintf(format, args...)))
	}
	if c.ConnectTo.String() == "" || (c.ConnectTo.Scheme != "unix" && c.ConnectTo.Scheme != "tcp") {
		bad("CONNECT_TO", "must be a unix:// or tcp:// URL, got %q", c.ConnectTo.String())
	}
	for env, v := range map[string]string{"NAME": c.Name, "SERVICE_NAME": c.ServiceName,
		"NETWORK_SERVICE_NAME": c.NetworkServiceName, "TRENCH": c.Trench, "CONDUIT": c.Conduit} {
		if strings.TrimSpace(v) == "" {
			bad(env, "must not be empty")
		}
	}
	if c.IPAMService == "" {
		bad("IPAM_SERVICE", "must not be empty")
	}
	minMTU := 1280
	if len(c.Families()) == 1 && c.Families()[0] == IPv4 {
		minMTU = 576
	}
	if c.MTU < minMTU || c.MTU > 65535 {
		bad("MTU", "%d is out of range [%d, 65535] for %s", c.MTU, minMTU, c.familyName())
	}
	for env, d := range map[string]time.Duration{"DIAL_TIMEOUT": c.DialTimeout, "REQUEST_TIMEOUT": c.RequestTimeout,
		"MAX_TOKEN_LIFETIME": c.MaxTokenLifetime, "GRPC_KEEPALIVE_TIME": c.GRPCKeepaliveTime,
		"GRPC_PROBE_RPC_TIMEOUT": c.GRPCProbeRPCTimeout, "GRPC_MAX_BACKOFF": c.GRPCMaxBackoff,
		"BRIDGE_IP_RENEW_INTERVAL": c.BridgeIPRenewInterval} {
		if d <= 0 {
			bad(env, "must be positive, got %s", d)
		}
	}
	if c.RequestTimeout > 0 && c.MaxTokenLifetime > 0 && c.MaxTokenLifetime < 2*c.RequestTimeout {
		bad("MAX_TOKEN_LIFETIME", "%s is less than twice NSM_REQUEST_TIMEOUT (%s): a token would expire within a request's tries, and NSM closes such connections right after they are made",
			c.MaxTokenLifetime, c.RequestTimeout)
	}
	if c.IPReleaseDelay < 0 {
		bad("IP_RELEASE_DELAY", "must not be negative, got %s", c.IPReleaseDelay)
	}
	if c.LeftoverHold < 0 {
		bad("LEFTOVER_HOLD", "must not be negative, got %s", c.LeftoverHold)
	}
	if c.NSPServicePort <= 0 || c.NSPServicePort > 65535 {
		bad("NSP_SERVICE_PORT", "%d is not a port", c.NSPServicePort)
	}
	if c.Table <= 0 || c.Table >= 253 {
		bad("TABLE", "%d must be in [1, 252] (253-255 are the kernel's)", c.Table)
	}
	if n := len(c.BridgeName); n == 0 || n > 15 {
		bad("BRIDGE_NAME", "%q must be 1 to 15 characters", c.BridgeName)
	}
	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		bad("LOG_LEVEL", "%v", err)
	}
	if _, err := c.MetricsPort(); err != nil {
		bad("METRICS_ADDRESS", "%v", err)
	}
	if c.ServiceProvider != servicelb.ProviderNftables && c.ServiceProvider != servicelb.ProviderUserspace {
		bad("SERVICE_PROVIDER", "%q is not %q or %q", c.ServiceProvider, servicelb.ProviderNftables, servicelb.ProviderUserspace)
	}
	errs = append(errs, c.validateServicesSource()...)
	if _, err := c.VIPPolicy(); err != nil {
		bad("CLUSTER_PREFIXES", "%v", err)
	}
	if c.VIPMinPrefixLength4 < 1 || c.VIPMinPrefixLength4 > 32 {
		bad("VIP_MIN_PREFIX_LENGTH_IPV4", "%d is not in [1, 32]", c.VIPMinPrefixLength4)
	}
	if c.VIPMinPrefixLength6 < 1 || c.VIPMinPrefixLength6 > 128 {
		bad("VIP_MIN_PREFIX_LENGTH_IPV6", "%d is not in [1, 128]", c.VIPMinPrefixLength6)
	}
	for env, n := range map[string]int{"MAX_CONNECTIONS_PER_CLIENT": c.MaxConnectionsPerClient, "SERVICES_MAX": c.ServicesMax,
		"SERVICE_MAX_CONNECTIONS_PER_CLIENT": c.ServiceMaxConnectionsPerClient} {
		if n <= 0 {
			bad(env, "must be positive, got %d", n)
		}
	}
	if _, err := kubesource.ParseIDScheme(c.TargetIDScheme); err != nil {
		bad("TARGET_ID_SCHEME", "%v", err)
	}
	for env, rules := range map[string][]string{"IPAM_SERVER_IDS": c.IPAMServerIDs, "NSP_SERVER_IDS": c.NSPServerIDs, "TARGET_IDS": c.TargetIDs} {
		if _, err := spiffeauthz.ParseRules(rules); err != nil {
			bad(env, "%v", err)
		}
	}
	if _, err := c.EndpointPrefixList(); err != nil {
		bad("ENDPOINT_PREFIXES", "%v", err)
	}
	if _, err := servicelb.ParsePortRange(c.ServicePortRange); err != nil {
		bad("SERVICE_PORT_RANGE", "%v", err)
	}
	for env, d := range map[string]time.Duration{"SERVICE_SYNC_PERIOD": c.ServiceSyncPeriod, "SERVICE_UDP_IDLE_TIMEOUT": c.ServiceUDPIdleTimeout} {
		if d <= 0 {
			bad(env, "must be positive, got %s", d)
		}
	}
	if c.NexthopCheckInterval <= 0 || c.NexthopCheckFailures <= 0 || c.NexthopCheckSuccesses <= 0 || c.NexthopCheckHoldDown <= 0 {
		bad("NEXTHOP_CHECK_*", "interval, failures, successes and hold-down must be positive, got %s, %d, %d, %s",
			c.NexthopCheckInterval, c.NexthopCheckFailures, c.NexthopCheckSuccesses, c.NexthopCheckHoldDown)
	} else if err := c.NexthopCheck().Validate(); err != nil {
		bad("NEXTHOP_CHECK_*", "%v", err)
	}
	if s, on := c.TargetCheck(); on {
		if err := s.Validate(); err != nil {
			bad("TARGET_CHECK_INTERVAL", "%v", err)
		}
	}
	return errors.Join(errs...)
}

// Family is an IP family served by the proxy.
type Family int

const (
	IPv4 Family = iota
	IPv6
)

func (f Family) String() string {
	if f == IPv6 {
		return "ipv6"
	}
	return "ipv4"
}

// Contains reports whether addr belongs to the family.
func (f Family) Contains(addr netip.Addr) bool {
	return addr.Is4() == (f == IPv4)
}
