// Package provider builds the service load balancer Provider that the
// configuration names (servicelb.ProviderUserspace or ProviderNftables) and
// removes what either left behind (CleanupLeftovers).
package provider

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/nftlb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace"
)

// Config is the union of both providers' settings; each reads its own.
type Config struct {
	// Provider is "userspace" or "nftables".
	Provider      string
	NetNS         netns.NsHandle
	Logger        *slog.Logger
	SyncPeriod    time.Duration
	MinSyncPeriod time.Duration
	OnSync        servicelb.SyncObserver

	// userspace
	ListenIP       netip.Addr
	PortRange      servicelb.PortRange
	UDPIdleTimeout time.Duration
	MaxUDPClients  int
	Recorder       servicelb.Recorder
	// MaxTCPPerClient and Refusals: userspace.Options'.
	MaxTCPPerClient int
	Refusals        *limits.Refusals
}

// New returns the configured provider.
func New(cfg Config) (servicelb.Provider, error) {
	switch cfg.Provider {
	case servicelb.ProviderUserspace:
		return userspace.NewProxier(servicelb.NewLoadBalancerRR(), cfg.ListenIP, cfg.PortRange, cfg.SyncPeriod, userspace.Options{
			NetNS: cfg.NetNS, Logger: cfg.Logger, Recorder: cfg.Recorder, MinSyncPeriod: cfg.MinSyncPeriod,
			UDPIdleTimeout: cfg.UDPIdleTimeout, MaxUDPClients: cfg.MaxUDPClients, OnSync: cfg.OnSync,
			MaxTCPPerClient: cfg.MaxTCPPerClient, Refusals: cfg.Refusals,
		})
	case servicelb.ProviderNftables:
		return nftlb.New(nftlb.Options{NetNS: cfg.NetNS, Logger: cfg.Logger, MinSyncPeriod: cfg.MinSyncPeriod,
			SyncPeriod: cfg.SyncPeriod, OnSync: cfg.OnSync})
	}
	return nil, fmt.Errorf("unknown service load balancer provider %q (want %q or %q)",
		cfg.Provider, servicelb.ProviderUserspace, servicelb.ProviderNftables)
}

// CleanupLeftovers removes the tables of both providers from ns, whichever
// ran there before.
func CleanupLeftovers(ns netns.NsHandle) error {
	return errors.Join(nftlb.CleanupLeftovers(ns), userspace.CleanupLeftovers(ns))
}
