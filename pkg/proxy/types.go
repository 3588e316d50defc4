package proxy

import "fmt"

// ConnType says which side of an NSM connection the proxy is on.
type ConnType int

const (
	// TargetConn is a connection from a target to the proxy (the proxy is
	// the NSE; Meridio calls this type NSE).
	TargetConn ConnType = iota
	// LBConn is a connection from the proxy to a load balancer (the proxy
	// is the NSC; Meridio calls this type NSC).
	LBConn
)

func (t ConnType) String() string {
	switch t {
	case TargetConn:
		return "target"
	case LBConn:
		return "lb"
	default:
		return "unknown"
	}
}

// Interface is the kernel link of an NSM connection in the proxy's
// namespace, as the link matcher matched it (the connection's
// addresses are the proxy's own). The proxy keeps the Interface of each
// connection (InterfaceOf, InterfaceAt); the monitor asks it.
type Interface struct {
	// Index and Name identify the link in the proxy's namespace.
	Index int
	Name  string
	// Type is the connection's type.
	Type ConnType
	// ConnKey is the key of the connection the link belongs to (see
	// ConnKey); debug dumps keep its earlier name.
	ConnKey string `json:"ConnID"`
}

// MarshalText makes ConnType readable in JSON dumps.
func (t ConnType) MarshalText() ([]byte, error) { return []byte(t.String()), nil }

// UnmarshalText reads what MarshalText writes, so that a JSON dump (-debug)
// decodes back into a Snapshot.
func (t *ConnType) UnmarshalText(b []byte) error {
	switch string(b) {
	case "target":
		*t = TargetConn
	case "lb":
		*t = LBConn
	default:
		return fmt.Errorf("unknown connection type %q", b)
	}
	return nil
}
