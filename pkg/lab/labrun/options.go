package labrun

import (
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

// Defaults of Options.
const (
	DefaultTrench         = "trench-a"
	DefaultConduit        = "load-balancer"
	DefaultNamespace      = "lab"
	DefaultTargets        = 3
	DefaultReleaseDelay   = 20 * time.Second
	DefaultIPAMPrefixIPv4 = "172.30.0.0/16"
	DefaultIPAMPrefixIPv6 = "fd5a:ca5e::/48"
	DefaultEchoPort       = 5000
	DefaultServicePort    = 5001
	DefaultNSEExpiration  = 15 * time.Second
	DefaultLogLevel       = "INFO"
	// MinTokenLifetime is the shortest token lifetime the lab takes:
	// twice the proxy's request timeout (NSM_MAX_TOKEN_LIFETIME is held
	// to the same).
	MinTokenLifetime = 30 * time.Second
	// NodeName is the lab's one node: every component's NODE_NAME (the
	// NSMgr labels the targets' requests with it, as in a cluster) and the
	// proxy's NSM_HOST.
	NodeName = "lab-node"
)

// DefaultVIPs are one IPv4 and one IPv6 VIP in documentation ranges.
var DefaultVIPs = []string{"203.0.113.1/32", "2001:db8:20::1/128"}

// DefaultLBs are the names of the load balancers.
var DefaultLBs = []string{"lb-a", "lb-b"}

// Options describe a lab. The zero value is a complete default lab.
type Options struct {
	// BinDir holds the proxy, ipam, nsp and lab binaries (default: the
	// directory of the running executable if it holds a proxy binary, else
	// ./bin).
	BinDir string
	// RunBase is the parent of the run directories (default topo.DefaultBase).
	RunBase string
	// Trench, Conduit and Namespace name the conduit the lab serves.
	Trench, Conduit, Namespace string
	// VIPs of the trench (default DefaultVIPs).
	VIPs []string
	// Targets is how many targets start (default DefaultTargets).
	Targets int
	// LBs are the load balancers' names (default DefaultLBs).
	LBs []string
	// ReleaseDelay is the proxy's NSM_IP_RELEASE_DELAY.
	ReleaseDelay time.Duration
	// IPAMPrefixIPv4 and IPAMPrefixIPv6 are the IPAM's pools.
	IPAMPrefixIPv4 string
	IPAMPrefixIPv6 string
	// EchoPort is the TCP and UDP echo port of the targets on the VIPs.
	EchoPort int
	// ServicePort is the targets' TCP and UDP echo port on their own
	// addresses, the endpoints of the lab's services (default
	// DefaultServicePort); NoServices runs the lab without services.
	ServicePort int
	NoServices  bool
	// ServiceProvider is the proxy's NSM_SERVICE_PROVIDER (default
	// nftables).
	ServiceProvider string
	// NSEExpiration is the registration expiration of the NSEs (bounds how
	// long a killed LB stays registered).
	NSEExpiration time.Duration
	// TokenLifetime of the NSM tokens of the control plane, the targets and
	// the proxy (NSM_MAX_TOKEN_LIFETIME); connections refresh at a third
	// of it (default controlplane.DefaultTokenLifetime).
	TokenLifetime time.Duration
	// IPAMEnv and ProxyEnv are added to the environment of the ipam and
	// proxy processes after the lab's own settings (so they override them),
	// e.g. IPAM_NODE_PREFIX_LENGTH_IPV4=29 for a pool too small.
	IPAMEnv, ProxyEnv []string
	// LogLevel of the proxy, ipam and nsp processes (default INFO).
	LogLevel string
	// Logger of the lab itself (default: discard).
	Logger *slog.Logger
	// Stdout receives progress lines (default: discard).
	Stdout io.Writer
}

var namePattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,14}[a-z0-9])?$`)

// withDefaults fills the zero fields and validates the result.
func (o Options) withDefaults() (Options, error) {
	if o.BinDir == "" {
		o.BinDir = defaultBinDir()
	}
	if abs, err := filepath.Abs(o.BinDir); err == nil {
		o.BinDir = abs
	}
	if o.RunBase == "" {
		o.RunBase = topo.DefaultBase
	}
	if o.Trench == "" {
		o.Trench = DefaultTrench
	}
	if o.Conduit == "" {
		o.Conduit = DefaultConduit
	}
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.VIPs == nil {
		o.VIPs = DefaultVIPs
	}
	if o.Targets == 0 {
		o.Targets = DefaultTargets
	}
	if o.LBs == nil {
		o.LBs = DefaultLBs
	}
	if o.ReleaseDelay == 0 {
		o.ReleaseDelay = DefaultReleaseDelay
	}
	if o.IPAMPrefixIPv4 == "" {
		o.IPAMPrefixIPv4 = DefaultIPAMPrefixIPv4
	}
	if o.IPAMPrefixIPv6 == "" {
		o.IPAMPrefixIPv6 = DefaultIPAMPrefixIPv6
	}
	if o.EchoPort == 0 {
		o.EchoPort = DefaultEchoPort
	}
	if o.ServicePort == 0 {
		o.ServicePort = DefaultServicePort
	}
	if o.NoServices {
		o.ServicePort = 0
	}
	if o.ServiceProvider == "" {
		o.ServiceProvider = servicelb.ProviderNftables
	}
	if o.NSEExpiration == 0 {
		o.NSEExpiration = DefaultNSEExpiration
	}
	if o.TokenLifetime == 0 {
		o.TokenLifetime = controlplane.DefaultTokenLifetime
	}
	if o.LogLevel == "" {
		o.LogLevel = DefaultLogLevel
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	if _, err := parseVIPs(o.VIPs); err != nil {
		return o, err
	}
	if o.ServiceProvider != servicelb.ProviderNftables && o.ServiceProvider != servicelb.ProviderUserspace {
		return o, fmt.Errorf("service provider %q (want %s or %s)", o.ServiceProvider, servicelb.ProviderNftables, servicelb.ProviderUserspace)
	}
	if o.TokenLifetime < MinTokenLifetime {
		return o, fmt.Errorf("token lifetime %s: at least %s (twice the proxy's 15 s request timeout; a shorter token expires within a request's tries, and NSM closes the connections right after they are made)",
			o.TokenLifetime, MinTokenLifetime)
	}
	if o.Targets < 0 {
		return o, fmt.Errorf("targets: %d", o.Targets)
	}
	if len(o.LBs) > 200 {
		return o, fmt.Errorf("too many LBs: %d", len(o.LBs))
	}
	for _, n := range o.LBs {
		if err := checkName(n); err != nil {
			return o, err
		}
	}
	for _, p := range []string{o.IPAMPrefixIPv4, o.IPAMPrefixIPv6} {
		if _, err := netip.ParsePrefix(p); err != nil {
			return o, fmt.Errorf("IPAM prefix: %w", err)
		}
	}
	return o, nil
}

// checkName accepts names usable as namespace roles and file names.
func checkName(n string) error {
	if !namePattern.MatchString(n) || n == "ctl" || n == "proxy" || n == "ext" {
		return fmt.Errorf("invalid component name %q (lower-case letters, digits and '-', at most 16, not ctl/proxy/ext)", n)
	}
	return nil
}

func parseVIPs(vips []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(vips))
	for _, v := range vips {
		p, err := netip.ParsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("VIP %q: %w", v, err)
		}
		out = append(out, p)
	}
	return out, nil
}

func defaultBinDir() string {
	if exe, err := os.Executable(); err == nil {
		dir := filepath.Dir(exe)
		if _, err := os.Stat(filepath.Join(dir, "proxy")); err == nil {
			return dir
		}
	}
	return "bin"
}
