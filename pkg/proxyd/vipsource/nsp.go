package vipsource

import (
	"context"
	"net/netip"

	"google.golang.org/grpc"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/pkg/nspwatch"
)

// NSPSource is a VIPSource fed by ConfigurationManager.WatchVip for one
// trench (nspwatch.WatchVIPs). It works over any gRPC connection to a server
// of the nsp.v1 API (Causeway's cmd/nsp or Meridio's NSP): the caller dials
// (credentials, keepalive) and owns the connection. When the stream breaks
// the source keeps the last list and re-opens the watch with capped
// exponential backoff. Addresses that do not parse are logged and skipped;
// the others are still delivered.
type NSPSource struct {
	client nspv1.ConfigurationManagerClient
	trench string
	opts   []nspwatch.Option
}

// NewNSPSource returns a source of the VIPs of trench served over cc.
func NewNSPSource(cc grpc.ClientConnInterface, trench string, opts ...nspwatch.Option) *NSPSource {
	return &NSPSource{client: nspv1.NewConfigurationManagerClient(cc), trench: trench, opts: opts}
}

// Run implements VIPSource.
func (s *NSPSource) Run(ctx context.Context, update func([]netip.Prefix)) error {
	nspwatch.WatchVIPs(ctx, s.client, s.trench, dedup(update), s.opts...)
	return nil
}
