package proxy

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
	"github.com/causeway-net/causeway/internal/clock"
	"github.com/causeway-net/causeway/pkg/dataplane"
)

// Defaults applied by New to zero Config fields.
const (
	DefaultReleaseDelay        = 20 * time.Second
	DefaultBridgeRenewInterval = 5 * time.Minute
	DefaultRetryInterval       = 200 * time.Millisecond
	DefaultIPAMTimeout         = 10 * time.Second
)

// Dataplane is what the proxy needs from pkg/dataplane: a declarative Apply of
// the whole desired state (which also flushes the conntrack entries of the
// VIPs and nexthops it removes, deletes the links it names to remove,
// closed connections' leftovers among them, and ends the hold on what the
// start found). It is the proxy's one way into the kernel, and the sync
// loop its one caller. *dataplane.Dataplane satisfies it.
type Dataplane interface {
	Apply(dataplane.State) error
}

var _ Dataplane = (*dataplane.Dataplane)(nil)

// Config configures a Proxy.
type Config struct {
	// Conduit and Trench name the conduit whose node subnets the proxy
	// allocates from.
	Conduit string
	Trench  string
	// Node is the node name, the IPAM Subnet.node.
	Node string
	// Families are the address families served, see ParseIPFamily. They
	// are always handled in the order IPv4, IPv6. Empty means dual-stack.
	Families []ipamv1.IPFamily
	// IPAM is the IPAM client.
	IPAM ipamv1.IpamClient
	// Dataplane receives the desired kernel state on every change. A
	// closed connection's link that is still there when its addresses are
	// about to be released goes with it (State.Remove): the forwarder
	// removes it on Close, but a Close that never reached a forwarder (or
	// one that restarted and forgot it) leaves it, and with it the
	// addresses, which the IPAM would then hand to another connection.
	Dataplane Dataplane
	// ReleaseDelay is how long the addresses of a closed connection are kept
	// before they are released; a new request for the same id within the
	// delay keeps them (default 20s).
	ReleaseDelay time.Duration
	// BridgeRenewInterval is the period of the bridge allocation renewal
	// (default 5m).
	BridgeRenewInterval time.Duration
	// RetryInterval is the pause between retries of failed IPAM calls at
	// startup and in releases, and of failed dataplane applies (default
	// 200ms).
	RetryInterval time.Duration
	// IPAMTimeout bounds each background IPAM call: renewals and release
	// attempts (default 10s). Calls made for a request use its context.
	IPAMTimeout time.Duration
	// VIPs is what a VIP may not be (see VIPPolicy); zero bounds take the
	// defaults.
	VIPs VIPPolicy
	// MaxConnectionsPerClient bounds the target connections one client
	// (targetClient) holds; a new one past it is refused with
	// ResourceExhausted, logged once per client and counted (default
	// DefaultMaxConnectionsPerClient).
	MaxConnectionsPerClient int
	// TargetIdentity proves and admits the clients of target connections.
	TargetIdentity TargetIdentity
	// PortFilterOff leaves the targets' ports unfiltered: by default each
	// target's port may send only from its own MAC (the first it uses)
	// and from its own addresses and the VIPs (dataplane.PortFilter).
	PortFilterOff bool
	// Logger defaults to slog.Default().
	Logger *slog.Logger
	// Clock times the release delays and the bridge renewal; nil means the
	// real clock.
	Clock clock.Clock
}

// ParseIPFamily maps Meridio's NSM_IP_FAMILY values to the families served:
// "ipv4", "ipv6" (case-insensitive), anything else is dual-stack.
func ParseIPFamily(s string) []ipamv1.IPFamily {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "ipv4":
		return []ipamv1.IPFamily{ipamv1.IPFamily_IPV4}
	case "ipv6":
		return []ipamv1.IPFamily{ipamv1.IPFamily_IPV6}
	default:
		return []ipamv1.IPFamily{ipamv1.IPFamily_IPV4, ipamv1.IPFamily_IPV6}
	}
}

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	var errs []error
	if c.IPAM == nil {
		errs = append(errs, errors.New("no IPAM client"))
	}
	if c.Dataplane == nil {
		errs = append(errs, errors.New("no dataplane"))
	}
	if c.Conduit == "" {
		errs = append(errs, errors.New("no conduit name"))
	}
	if c.Trench == "" {
		errs = append(errs, errors.New("no trench name"))
	}
	if len(errs) > 0 {
		return c, fmt.Errorf("invalid proxy config: %w", errors.Join(errs...))
	}
	if len(c.Families) == 0 {
		c.Families = ParseIPFamily("dualstack")
	}
	var v4, v6 bool
	for _, f := range c.Families {
		switch f {
		case ipamv1.IPFamily_IPV4:
			v4 = true
		case ipamv1.IPFamily_IPV6:
			v6 = true
		default:
			return c, fmt.Errorf("invalid proxy config: unknown IP family %d", f)
		}
	}
	c.Families = nil
	if v4 {
		c.Families = append(c.Families, ipamv1.IPFamily_IPV4)
	}
	if v6 {
		c.Families = append(c.Families, ipamv1.IPFamily_IPV6)
	}
	if c.ReleaseDelay <= 0 {
		c.ReleaseDelay = DefaultReleaseDelay
	}
	if c.BridgeRenewInterval <= 0 {
		c.BridgeRenewInterval = DefaultBridgeRenewInterval
	}
	if c.RetryInterval <= 0 {
		c.RetryInterval = DefaultRetryInterval
	}
	if c.IPAMTimeout <= 0 {
		c.IPAMTimeout = DefaultIPAMTimeout
	}
	c.VIPs = c.VIPs.withDefaults()
	if c.MaxConnectionsPerClient <= 0 {
		c.MaxConnectionsPerClient = DefaultMaxConnectionsPerClient
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	return c, nil
}
