package servicelb

import (
	"context"
	"time"
)

// Provider is one way of serving service ports: userspace (a socket per
// service port, the kernel redirecting the service IP:port to it) or nftables
// (DNAT in the kernel, no user-space hop).
type Provider interface {
	ServiceHandler
	EndpointsHandler
	// Sync asks for a reconciliation soon; calls are rate-limited.
	Sync()
	// SyncLoop reconciles on request and every sync period until ctx ends.
	SyncLoop(ctx context.Context)
	// CleanupLeftovers removes every kernel object of this provider
	// (including those a previous process left) and returns what failed;
	// nil means it met no error.
	CleanupLeftovers() error
	// Close stops serving, releases sockets and removes the kernel objects.
	Close() error
}

// Provider names, as configuration spells them.
const (
	ProviderUserspace = "userspace"
	ProviderNftables  = "nftables"
)

// SyncObserver is told of each sync a provider's loop runs: how long it
// took and whether it failed (metrics).
type SyncObserver func(took time.Duration, err error)
