package ipam

import (
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/internal/clock"
)

// Family is an address family.
type Family uint8

// The address families.
const (
	IPv4 Family = 4
	IPv6 Family = 6
)

// String names the family.
func (f Family) String() string {
	switch f {
	case IPv4:
		return "ipv4"
	case IPv6:
		return "ipv6"
	}
	return fmt.Sprintf("family(%d)", uint8(f))
}

// FamilyConfig is the carving geometry of one family.
type FamilyConfig struct {
	// Pool is the trench prefix, e.g. 169.255.0.0/16.
	Pool netip.Prefix
	// ConduitLength and NodeLength are the prefix lengths of conduit and node
	// subnets.
	ConduitLength, NodeLength int
}

// Validate checks the geometry: a canonical pool, pool < conduit < node
// lengths, and at least two usable addresses per node.
func (f FamilyConfig) Validate() error {
	if !f.Pool.IsValid() {
		return fmt.Errorf("pool is not a valid CIDR")
	}
	if f.Pool.Masked() != f.Pool {
		return fmt.Errorf("pool %s has host bits set (did you mean %s?)", f.Pool, f.Pool.Masked())
	}
	if f.ConduitLength <= f.Pool.Bits() {
		return fmt.Errorf("conduit prefix length %d must be longer than the pool's /%d", f.ConduitLength, f.Pool.Bits())
	}
	if f.NodeLength <= f.ConduitLength {
		return fmt.Errorf("node prefix length %d must be longer than the conduit prefix length %d", f.NodeLength, f.ConduitLength)
	}
	if max := f.Pool.Addr().BitLen() - 2; f.NodeLength > max {
		return fmt.Errorf("node prefix length %d leaves no usable address (at most %d)", f.NodeLength, max)
	}
	return nil
}

// Default geometries, as Meridio's IPAM.
var (
	DefaultIPv4 = FamilyConfig{Pool: netip.MustParsePrefix("169.255.0.0/16"), ConduitLength: 20, NodeLength: 24}
	DefaultIPv6 = FamilyConfig{Pool: netip.MustParsePrefix("fd00::/48"), ConduitLength: 56, NodeLength: 64}
)

// Default limits of the daemon (Config's zero is no bound).
const (
	DefaultMaxConduits        = 64
	DefaultMaxChildrenPerNode = 1024
)

// Config configures an Engine.
type Config struct {
	// Trench is the only trench this IPAM serves.
	Trench string
	// IPv4 and IPv6 are the served families; nil means not served.
	IPv4, IPv6 *FamilyConfig
	// GCInterval is the period of the lease garbage collector; 0 disables
	// it. The first collection runs in New.
	GCInterval time.Duration
	// GCThreshold is how long a node or (non-bridge) child may go without a
	// renewal before it is collected.
	GCThreshold time.Duration
	// LeaseFlushInterval is how often renewed lease times are written to
	// the store (write-behind). After a crash a lease may look up to this
	// much older than it is, so keep it well below GCThreshold. Default 1m.
	LeaseFlushInterval time.Duration
	// MaxBatch caps the changes committed in one store transaction.
	// Default 4096; 1 gives one commit per change (no group commit).
	MaxBatch int
	// MaxConduits bounds the conduits of the trench, per family (listed
	// or not: a caller may name any conduit); MaxChildrenPerNode the
	// children of one node subnet (an IPv6 /64 has no useful bound of
	// its own). Zero: no bound (the daemon's settings default to the
	// values below); a refusal is ErrExhausted (gRPC ResourceExhausted),
	// logged once per cause and counted.
	MaxConduits, MaxChildrenPerNode int
	// OnStoreHealth, if set, is called (from the writer goroutine) with false
	// when a store commit fails after succeeding, and with true when commits
	// succeed again.
	OnStoreHealth func(ok bool)
	// Clock tells the time of leases and drains (default clock.Real()).
	Clock clock.Clock
	// Logger (default slog.Default()).
	Logger *slog.Logger
}

func (c *Config) family(f Family) *FamilyConfig {
	switch f {
	case IPv4:
		return c.IPv4
	case IPv6:
		return c.IPv6
	}
	return nil
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	if err := ValidateName("trench", c.Trench, false); err != nil {
		return err
	}
	if c.IPv4 == nil && c.IPv6 == nil {
		return fmt.Errorf("no address family configured")
	}
	for _, f := range []Family{IPv4, IPv6} {
		fc := c.family(f)
		if fc == nil {
			continue
		}
		if err := fc.Validate(); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
		if fc.Pool.Addr().Is4() != (f == IPv4) {
			return fmt.Errorf("%s: pool %s is of the wrong family", f, fc.Pool)
		}
	}
	if c.GCInterval < 0 || c.GCThreshold < 0 || c.LeaseFlushInterval < 0 || c.MaxBatch < 0 || c.MaxConduits < 0 || c.MaxChildrenPerNode < 0 {
		return fmt.Errorf("negative interval, threshold or batch size")
	}
	if c.GCInterval > 0 && c.GCThreshold == 0 {
		return fmt.Errorf("garbage collection threshold must be positive")
	}
	return nil
}

// Name limits. Trench, conduit and node names are Kubernetes object names
// (at most 253 characters); child names embed pod, conduit and trench names,
// so they may be longer.
const (
	MaxObjectNameLength = 253
	MaxChildNameLength  = 1024
)

// ValidateName checks a name: visible ASCII characters only (no spaces,
// control characters or non-ASCII: names come from Kubernetes objects and
// NSM connection ids, which never need them), at most MaxObjectNameLength
// (MaxChildNameLength for children). Empty is allowed only when allowEmpty
// (node names: Meridio's proxies without NSM_HOST all share the node "").
func ValidateName(what, name string, allowEmpty bool) error {
	limit := MaxObjectNameLength
	if what == "child" {
		limit = MaxChildNameLength
	}
	if name == "" {
		if allowEmpty {
			return nil
		}
		return fmt.Errorf("%w: %s name is missing", ErrInvalidArgument, what)
	}
	if len(name) > limit {
		return fmt.Errorf("%w: %s name is %d characters long (at most %d)", ErrInvalidArgument, what, len(name), limit)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c <= ' ' || c > '~' {
			return fmt.Errorf("%w: %s name %.64q has a character that is not visible ASCII at %d", ErrInvalidArgument, what, name, i)
		}
	}
	return nil
}
