package servicelb

import (
	"net/netip"
	"time"
)

// PortState is what a provider shows of one service port it serves (for
// the proxy's -debug and metrics).
type PortState struct {
	Service         string           `json:"service"`
	Ref             Reference        `json:"ref"`
	Addr            netip.AddrPort   `json:"addr"`
	Protocol        Protocol         `json:"protocol"`
	Affinity        AffinityType     `json:"affinity"`
	AffinityTimeout time.Duration    `json:"affinityTimeout,omitempty"`
	Endpoints       []netip.AddrPort `json:"endpoints"`

	// userspace: the socket the kernel redirects to, its relayed TCP
	// connections (with dials in flight) and its UDP flows.
	ProxyPort      uint16 `json:"proxyPort,omitempty"`
	TCPConnections int    `json:"tcpConnections,omitempty"`
	UDPClients     int    `json:"udpClients,omitempty"`
	UDPRefused     uint64 `json:"udpRefused,omitempty"`

	// nftables: the service port's chain and the new connections or UDP
	// flows its dispatch rule has sent there (since the rule was last
	// written; -1 when the counter could not be read).
	Chain       string `json:"chain,omitempty"`
	NewFlows    int64  `json:"newFlows,omitempty"`
	NewFlowSize int64  `json:"newFlowBytes,omitempty"`
}

// NewPortState fills the fields that every provider shows.
func NewPortState(pi ServicePortInfo, eps []netip.AddrPort) PortState {
	return PortState{Service: pi.Name.String(), Ref: pi.Ref, Addr: pi.Addr(), Protocol: pi.Protocol,
		Affinity: pi.Affinity, AffinityTimeout: pi.AffinityTimeout, Endpoints: eps}
}

// Inspector is implemented by providers that show their service ports.
type Inspector interface {
	// PortStates lists the service ports served, sorted by Service.
	PortStates() []PortState
}

// StatsReporter is implemented by providers that count their syncs
// (nftables).
type StatsReporter interface {
	// Stats returns the figures of the syncs so far.
	Stats() SyncStats
}
