package labrun

import (
	"fmt"
	"net/netip"
)

// The lab's own addresses (infrastructure links and the external host).
var (
	ctlAddr   = netip.MustParsePrefix("198.18.0.1/30") // ctl end of the ctl-proxy link
	proxyAddr = netip.MustParsePrefix("198.18.0.2/30") // proxy end of it
	extV4     = netip.MustParseAddr("198.19.0.1")      // the external host's client addresses
	extV6     = netip.MustParseAddr("fd5a:1ab:ff::1")
)

// Ports of the ctl namespace (one namespace per run: no collisions).
const (
	ipamPort = 7777
	nspPort  = 7778
	// Metrics, on by default in the lab (lab status lists them).
	proxyMetricsPort = 9091 // the proxy's default NSM_METRICS_ADDRESS port
	ipamMetricsPort  = 2112 // the ipam's default IPAM_METRICS_PORT
	nspMetricsPort   = 9092
)

// Interface names.
const (
	ctlIf    = "to-proxy" // in ctl
	proxyIf  = "to-ctl"   // in proxy
	lbExtIf  = "ext0"     // in each LB, toward ext
	bridgeIf = "bridge0"  // the proxy's bridge
	nsmIf    = "nsm-0"    // the targets' NSM interface (targetstub default)
	table    = 1          // the proxy's table
)

// lbLink is the addressing of the link between the external host and the
// LB of index i: ext side .1 / ::1, LB side .2 / ::2.
type lbLink struct {
	ExtIf      string
	Ext4, Ext6 netip.Prefix
	LB4, LB6   netip.Prefix
}

func linkOf(i int) lbLink {
	return lbLink{
		ExtIf: fmt.Sprintf("lb%d", i),
		Ext4:  netip.MustParsePrefix(fmt.Sprintf("198.18.%d.1/24", i+1)),
		LB4:   netip.MustParsePrefix(fmt.Sprintf("198.18.%d.2/24", i+1)),
		Ext6:  netip.MustParsePrefix(fmt.Sprintf("fd5a:1ab:0:%x::1/64", i+1)),
		LB6:   netip.MustParsePrefix(fmt.Sprintf("fd5a:1ab:0:%x::2/64", i+1)),
	}
}

func (l *Lab) ipamAddr() string { return fmt.Sprintf("%s:%d", ctlAddr.Addr(), ipamPort) }
func (l *Lab) nspAddr() string  { return fmt.Sprintf("%s:%d", ctlAddr.Addr(), nspPort) }

// lbService is the conduit's network service, <conduit>.<trench>.<ns>.
func (l *Lab) lbService() string {
	return l.st.Conduit + "." + l.st.Trench + "." + l.st.Namespace
}

// proxyService is the proxy's network service for the targets.
func (l *Lab) proxyService() string { return "proxy." + l.lbService() }
