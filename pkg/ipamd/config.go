// Package ipamd assembles the IPAM daemon: its IPAM_* configuration and the
// start/stop order of store, engine, gRPC, metrics and conduit watch.
// cmd/ipam only calls Load and Run.
package ipamd

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/causeway-net/causeway/internal/daemon"
	"github.com/causeway-net/causeway/internal/envload"
	"github.com/causeway-net/causeway/internal/logging"
	"github.com/causeway-net/causeway/pkg/grpcsecurity"
	"github.com/causeway-net/causeway/pkg/ipam"
	"github.com/causeway-net/causeway/pkg/ipam/leader"
	"github.com/causeway-net/causeway/pkg/spiffeauthz"
)

// Config is read from IPAM_* environment variables, with Meridio's names and
// defaults; the ones marked "new" are Causeway's.
type Config struct {
	Port                       int           `default:"7777" desc:"gRPC port of 'ipam.v1.Ipam' and 'grpc.health.v1' (0 picks a free port)"`
	Datasource                 string        `default:"/run/ipam/data/registry.db" desc:"bbolt file; its directory is created"`
	TrenchName                 string        `default:"default" split_words:"true" desc:"the only trench served; others get FailedPrecondition"`
	NSPService                 string        `default:"nsp-service:7778" envconfig:"NSP_SERVICE" desc:"NSP whose conduit list is followed; empty turns the watch off"`
	PrefixIPv4                 string        `default:"169.255.0.0/16" envconfig:"PREFIX_IPV4" desc:"IPv4 pool of the trench (the Helm chart sets '172.16.0.0/16')"`
	ConduitPrefixLengthIPv4    int           `default:"20" envconfig:"CONDUIT_PREFIX_LENGTH_IPV4" desc:"prefix length of a conduit's IPv4 subnet"`
	NodePrefixLengthIPv4       int           `default:"24" envconfig:"NODE_PREFIX_LENGTH_IPV4" desc:"prefix length of a node's IPv4 subnet"`
	PrefixIPv6                 string        `default:"fd00::/48" envconfig:"PREFIX_IPV6" desc:"IPv6 pool of the trench"`
	ConduitPrefixLengthIPv6    int           `default:"56" envconfig:"CONDUIT_PREFIX_LENGTH_IPV6" desc:"prefix length of a conduit's IPv6 subnet"`
	NodePrefixLengthIPv6       int           `default:"64" envconfig:"NODE_PREFIX_LENGTH_IPV6" desc:"prefix length of a node's IPv6 subnet"`
	IPFamily                   string        `default:"dualstack" envconfig:"IP_FAMILY" desc:"'dualstack', 'ipv4' or 'ipv6'"`
	LogLevel                   string        `default:"DEBUG" split_words:"true" desc:"'TRACE', 'DEBUG', 'INFO', 'WARN', 'ERROR' (JSON logs)"`
	GRPCKeepaliveTime          time.Duration `default:"30s" envconfig:"GRPC_KEEPALIVE_TIME" desc:"keepalive of the NSP connection and of the server"`
	GRPCProbeRPCTimeout        time.Duration `default:"1s" envconfig:"GRPC_PROBE_RPC_TIMEOUT" desc:"accepted for compatibility; probes use 'grpc.health.v1' directly"`
	GRPCMaxBackoff             time.Duration `default:"5s" envconfig:"GRPC_MAX_BACKOFF" desc:"reconnect backoff cap toward the NSP"`
	GarbageCollectionEnabled   bool          `default:"true" split_words:"true" desc:"lease collection on or off"`
	GarbageCollectionInterval  time.Duration `default:"2h" split_words:"true" desc:"period of the lease collector; the first run is at start-up"`
	GarbageCollectionThreshold time.Duration `default:"40m" split_words:"true" desc:"a node or non-bridge child not renewed for this long is collected"`

	ListenAddress      string        `default:"" split_words:"true" desc:"new: bind address of the gRPC and metrics ports; empty means all"`
	MetricsPort        int           `default:"2112" split_words:"true" desc:"new: Prometheus '/metrics' (allocations in use per conduit/node, RPC counts and latency); 0 turns it off"`
	MaxConduits        int           `default:"64" split_words:"true" desc:"new: conduits of the trench per family (a caller may name any conduit); one more is refused (ResourceExhausted), logged once, counted"`
	MaxChildrenPerNode int           `default:"1024" split_words:"true" desc:"new: addresses of one node subnet; one more is refused (ResourceExhausted), logged once per node, counted"`
	LeaseFlushInterval time.Duration `default:"1m" split_words:"true" desc:"new: write-behind period of renewed leases; the GC threshold must be at least twice it"`
	GracePeriod        time.Duration `default:"10s" split_words:"true" desc:"new: how long a stop waits for calls in flight"`
	SnapshotDir        string        `default:"" split_words:"true" desc:"new: directory of the store's snapshots; empty means 'snapshots/' next to 'IPAM_DATASOURCE' (see docs/ipam-store.md)"`
	SnapshotInterval   time.Duration `default:"15m" split_words:"true" desc:"new: period of store snapshots (one is also taken at every stop); 0 means only at stops"`
	SnapshotKeep       int           `default:"4" split_words:"true" desc:"new: how many snapshots are kept (the newest); 0 turns snapshots off; 'ipam restore' puts one back"`
	HealthPort         int           `default:"0" split_words:"true" desc:"new: port of a plain-text 'grpc.health.v1' alone, for the kubelet's gRPC probes (they speak no TLS); 0: none"`
	Insecure           bool          `default:"false" envconfig:"INSECURE" desc:"new: plain gRPC, asked for explicitly, for local use only (warned at start and hourly); otherwise SPIFFE mTLS from 'SPIFFE_ENDPOINT_SOCKET', which must be set"`
	NSPServerIDs       []string      `envconfig:"NSP_SERVER_IDS" desc:"new: comma-separated rules (as IPAM_AUTHORIZED_IDS) of the SPIFFE IDs the configuration server may have: the IPAM's NSP client refuses the handshake with any other; empty: any SVID the trust bundle verifies"`
	AuthorizedIDs      []string      `envconfig:"AUTHORIZED_IDS" desc:"new: comma-separated rules of the callers allowed (the trench's proxies): SPIFFE IDs, or paths in the server's own trust domain (/ns/<ns>/sa/<account>); path.Match wildcards within a segment (/ns/<ns>/pod/<name>-?????); others get PermissionDenied, logged with the rules they missed; empty: any SVID the trust bundle verifies"`
	NodeBound          bool          `default:"false" split_words:"true" desc:"new: holds each caller to its own node: Allocate and Release only for the node its SPIFFE ID names (an ID ending in /node/<name>, as the chart's spire.nodeIDs gives the proxies); another node, or a caller whose ID names none, gets PermissionDenied, logged once per caller and node, counted in causeway_ipam_node_refusals_total; ignored in insecure mode"`
	UnboundIDs         []string      `envconfig:"UNBOUND_IDS" desc:"new: with IPAM_NODE_BOUND, comma-separated rules (as IPAM_AUTHORIZED_IDS) of the callers not held to a node: the IPAM's own replicas, which forward calls they checked"`

	Store               string        `default:"bolt" desc:"new: 'bolt' (one replica, the file 'IPAM_DATASOURCE') or 'kubernetes' (custom resources, any number of replicas, one serving behind a Lease; docs/ipam-store.md)"`
	KubeNamespace       string        `default:"" split_words:"true" desc:"new, kubernetes store: namespace of the records and the Lease; empty: the pod's own"`
	Kubeconfig          string        `default:"" envconfig:"KUBECONFIG" desc:"new, kubernetes store or IPAM_FREE_DELETED_NODES: a kubeconfig file; empty: the pod's service account"`
	LeaderLeaseName     string        `default:"" split_words:"true" desc:"new, kubernetes store: the Lease the replicas share; empty: 'causeway-ipam-<trench>'"`
	LeaderLeaseDuration time.Duration `default:"15s" split_words:"true" desc:"new, kubernetes store: a leader's Lease lasts this long after its last renewal; it stops serving at two thirds of it"`
	Identity            string        `default:"" desc:"new, kubernetes store: this replica's name in the Lease and in the pools' 'servedBy'; empty: the host name (the pod's name)"`
	FreeDeletedNodes    bool          `default:"false" split_words:"true" desc:"new: watch the cluster's Nodes; the subnets of a node deleted from the cluster, with their addresses, are freed (by the leader, with replicas) once their leases end, instead of at the lease collector's next run (needs get, list, watch on nodes; either store)"`
	LeaderAddress       string        `default:"" split_words:"true" desc:"new, kubernetes store: where a standby forwards calls, host:port with '{identity}' standing for the leader's identity (the chart: '{identity}.<peer service>.<namespace>.svc:7777'); a standby is then ready while the leader answers; empty: standbys refuse calls (Unavailable) and are NOT_SERVING"`
}

// The stores IPAM_STORE names.
const (
	StoreBolt       = "bolt"
	StoreKubernetes = "kubernetes"
)

// EnvPrefix is the prefix of every IPAM environment variable.
const EnvPrefix = "ipam"

// Load reads the configuration from the environment and validates it. The
// error is meant to follow "ipam: " on the daemon's standard error.
func Load() (*Config, error) {
	var c Config
	if err := envload.Process(EnvPrefix, &c); err != nil {
		return nil, fmt.Errorf("cannot read the IPAM_* environment:\n%w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("invalid configuration:\n%w", err)
	}
	return &c, nil
}

// Validate checks the configuration and returns every problem found, one per
// line, each naming its environment variable.
func (c *Config) Validate() error {
	_, err := c.engineConfig()
	return err
}

// LogValue renders the configuration in a log line.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.Int("port", c.Port), slog.String("datasource", c.Datasource), slog.String("trenchName", c.TrenchName),
		slog.String("nspService", c.NSPService), slog.String("ipFamily", c.IPFamily),
		slog.String("ipv4", fmt.Sprintf("%s conduit /%d node /%d", c.PrefixIPv4, c.ConduitPrefixLengthIPv4, c.NodePrefixLengthIPv4)),
		slog.String("ipv6", fmt.Sprintf("%s conduit /%d node /%d", c.PrefixIPv6, c.ConduitPrefixLengthIPv6, c.NodePrefixLengthIPv6)),
		slog.Bool("gc", c.GarbageCollectionEnabled), slog.String("gcInterval", c.GarbageCollectionInterval.String()),
		slog.String("gcThreshold", c.GarbageCollectionThreshold.String()),
		slog.String("leaseFlushInterval", c.LeaseFlushInterval.String()),
		slog.String("gracePeriod", c.GracePeriod.String()),
		slog.String("snapshotDir", c.snapshots().Dir), slog.String("snapshotInterval", c.SnapshotInterval.String()),
		slog.Int("snapshotKeep", c.SnapshotKeep),
		slog.String("listenAddress", c.ListenAddress), slog.Int("metricsPort", c.MetricsPort), slog.Int("healthPort", c.HealthPort),
		slog.Bool("insecure", c.Insecure), slog.Any("authorizedIDs", c.AuthorizedIDs),
		slog.Bool("nodeBound", c.NodeBound), slog.Any("unboundIDs", c.UnboundIDs),
		slog.String("logLevel", c.LogLevel), slog.String("store", c.Store),
		slog.String("kubeNamespace", c.KubeNamespace), slog.String("kubeconfig", c.Kubeconfig),
		slog.String("leaderLeaseName", c.leaseName()), slog.String("leaderLeaseDuration", c.LeaderLeaseDuration.String()),
		slog.String("identity", c.Identity), slog.String("leaderAddress", c.LeaderAddress),
		slog.Bool("freeDeletedNodes", c.FreeDeletedNodes),
	)
}

// security is the transport security the configuration asks for.
func (c *Config) security() grpcsecurity.SecurityConfig {
	return grpcsecurity.SecurityConfig{
		EnvPrefix: "IPAM", Insecure: c.Insecure, Plaintext: "the IPAM's server and its NSP client", AuthorizedIDs: c.AuthorizedIDs,
	}
}

// engineConfig validates c and returns the engine configuration (without
// its logger and store-health hook). Every problem is reported, one per line.
func (c *Config) engineConfig() (ipam.Config, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if _, err := logging.ParseLevel(c.LogLevel); err != nil {
		bad("IPAM_LOG_LEVEL: %v", err)
	}
	out := ipam.Config{Trench: c.TrenchName, LeaseFlushInterval: c.LeaseFlushInterval,
		MaxConduits: c.MaxConduits, MaxChildrenPerNode: c.MaxChildrenPerNode}
	if c.MaxConduits <= 0 || c.MaxChildrenPerNode <= 0 {
		bad("IPAM_MAX_CONDUITS and IPAM_MAX_CHILDREN_PER_NODE must be positive")
	}
	if err := ipam.ValidateName("trench", c.TrenchName, false); err != nil {
		bad("IPAM_TRENCH_NAME: %v", err)
	}
	family := func(name, prefix string, condLen, nodeLen int, v4 bool) *ipam.FamilyConfig {
		p, err := netip.ParsePrefix(prefix)
		if err != nil {
			bad("IPAM_PREFIX_%s: %q is not a prefix in CIDR notation (such as %s)", name, prefix, map[bool]string{true: "172.16.0.0/16", false: "fd00::/48"}[v4])
			return nil
		}
		if p.Addr().Is4() != v4 {
			bad("IPAM_PREFIX_%s: %s is not an %s prefix", name, p, strings.ToLower(name))
			return nil
		}
		fc := &ipam.FamilyConfig{Pool: p, ConduitLength: condLen, NodeLength: nodeLen}
		if err := fc.Validate(); err != nil {
			bad("IPAM_PREFIX_%s / IPAM_CONDUIT_PREFIX_LENGTH_%s / IPAM_NODE_PREFIX_LENGTH_%s: %v", name, name, name, err)
			return nil
		}
		return fc
	}
	switch strings.ToLower(c.IPFamily) {
	case "dualstack":
		out.IPv4 = family("IPV4", c.PrefixIPv4, c.ConduitPrefixLengthIPv4, c.NodePrefixLengthIPv4, true)
		out.IPv6 = family("IPV6", c.PrefixIPv6, c.ConduitPrefixLengthIPv6, c.NodePrefixLengthIPv6, false)
	case "ipv4":
		out.IPv4 = family("IPV4", c.PrefixIPv4, c.ConduitPrefixLengthIPv4, c.NodePrefixLengthIPv4, true)
	case "ipv6":
		out.IPv6 = family("IPV6", c.PrefixIPv6, c.ConduitPrefixLengthIPv6, c.NodePrefixLengthIPv6, false)
	default:
		bad("IPAM_IP_FAMILY: %q is not dualstack, ipv4 or ipv6", c.IPFamily)
	}
	if err := daemon.CheckPorts(map[string]int{"IPAM_PORT": c.Port, "IPAM_METRICS_PORT": c.MetricsPort, "IPAM_HEALTH_PORT": c.HealthPort}); err != nil {
		errs = append(errs, err)
	}
	if err := c.security().Validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := spiffeauthz.ParseRules(c.NSPServerIDs); err != nil {
		bad("IPAM_NSP_SERVER_IDS: %v", err)
	}
	if _, err := spiffeauthz.ParseRules(c.UnboundIDs); err != nil {
		bad("IPAM_UNBOUND_IDS: %v", err)
	}
	switch c.Store {
	case StoreBolt, "": // "": a Config not loaded from the environment
		if c.Datasource == "" {
			bad("IPAM_DATASOURCE: empty")
		}
	case StoreKubernetes:
		if c.LeaderLeaseDuration < 3*time.Second {
			bad("IPAM_LEADER_LEASE_DURATION: %s is below 3s", c.LeaderLeaseDuration)
		}
		if msgs := validation.IsDNS1123Subdomain(c.leaseName()); len(msgs) > 0 {
			bad("IPAM_LEADER_LEASE_NAME: %q is not a Kubernetes object name: %s", c.leaseName(), strings.Join(msgs, "; "))
		}
		if c.LeaderAddress != "" && !strings.Contains(c.LeaderAddress, leader.IdentityPlaceholder) {
			bad("IPAM_LEADER_ADDRESS: %q does not contain %s (the leader's identity): every standby would forward to one fixed address", c.LeaderAddress, leader.IdentityPlaceholder)
		}
	default:
		bad("IPAM_STORE: %q is not %s or %s", c.Store, StoreBolt, StoreKubernetes)
	}
	if c.SnapshotInterval < 0 || c.SnapshotKeep < 0 {
		bad("IPAM_SNAPSHOT_INTERVAL and IPAM_SNAPSHOT_KEEP must not be negative")
	}
	if c.LeaseFlushInterval <= 0 {
		bad("IPAM_LEASE_FLUSH_INTERVAL: must be positive")
	}
	if c.GRPCKeepaliveTime <= 0 || c.GRPCMaxBackoff <= 0 || c.GracePeriod <= 0 {
		bad("IPAM_GRPC_KEEPALIVE_TIME, IPAM_GRPC_MAX_BACKOFF and IPAM_GRACE_PERIOD must be positive")
	}
	if c.GarbageCollectionEnabled {
		if c.GarbageCollectionInterval <= 0 || c.GarbageCollectionThreshold <= 0 {
			bad("IPAM_GARBAGE_COLLECTION_INTERVAL and IPAM_GARBAGE_COLLECTION_THRESHOLD must be positive")
		} else if c.GarbageCollectionThreshold < 2*c.LeaseFlushInterval {
			bad("IPAM_GARBAGE_COLLECTION_THRESHOLD (%s) must be at least twice IPAM_LEASE_FLUSH_INTERVAL (%s): after a crash leases may look that much older",
				c.GarbageCollectionThreshold, c.LeaseFlushInterval)
		}
		out.GCInterval = c.GarbageCollectionInterval
		out.GCThreshold = c.GarbageCollectionThreshold
	}
	return out, errors.Join(errs...)
}

// leaseName is the Lease of the replicas.
func (c *Config) leaseName() string {
	if c.LeaderLeaseName != "" {
		return c.LeaderLeaseName
	}
	return "causeway-ipam-" + strings.ToLower(c.TrenchName)
}
