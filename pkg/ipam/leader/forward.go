package leader

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/emptypb"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// HealthService is the grpc.health.v1 service that is SERVING on a replica
// only while its own engine serves (ipam.v1.Ipam is also SERVING on a
// standby that forwards): what a standby asks of the leader.
const HealthService = "causeway.ipam.leader"

// forwardedKey marks a call forwarded by a standby; a replica never
// forwards such a call again (two standbys that each believe the other
// leads refuse instead of passing a call back and forth).
const forwardedKey = "causeway-ipam-forwarded-by"

// IdentityPlaceholder stands for the leader's identity in a Forwarder's
// address template.
const IdentityPlaceholder = "{identity}"

// Forwarder serves a standby's calls by passing them to the replica that
// holds the Lease, over a connection with the service's own client
// credentials, and probes that replica's HealthService. It refuses with
// Unavailable while no other replica is known to lead. The zero value is
// not usable; Run must be running for the probes.
type Forwarder struct {
	ipamv1.UnimplementedIpamServer

	// Self is this replica's identity: a Lease naming it is not forwarded to.
	Self string
	// Address is a host:port template in which IdentityPlaceholder stands
	// for the leader's identity.
	Address string
	// Creds are the transport credentials of the connection to the leader.
	Creds credentials.TransportCredentials
	// Period is how often the leader is probed; OnReachable (if set) is
	// called with the result whenever it changes.
	Period      time.Duration
	OnReachable func(ok bool)
	Logger      *slog.Logger

	mu     sync.Mutex
	leader string
	conn   *grpc.ClientConn
	ok     bool
	closed bool // Run has ended: no more connections
}

var _ ipamv1.IpamServer = (*Forwarder)(nil)

// SetLeader makes id the replica calls are forwarded to (Elect's
// OnNewLeader, which client-go calls on a goroutine of its own: after Run
// has ended it does nothing).
func (f *Forwarder) SetLeader(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id == f.leader || f.closed {
		return
	}
	if f.conn != nil {
		_ = f.conn.Close()
		f.conn = nil
	}
	f.leader = id
	if id == "" || id == f.Self {
		return
	}
	addr := strings.ReplaceAll(f.Address, IdentityPlaceholder, id)
	// NewClient does not connect: a leader that cannot be reached shows in
	// the calls and the probes.
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(f.Creds))
	if err != nil {
		f.Logger.Error("cannot forward to the IPAM leader", "leader", id, "address", addr, "error", err)
		return
	}
	f.conn = conn
	f.Logger.Info("forwarding IPAM calls to the leader", "leader", id, "address", addr)
}

// client returns the connection to the leader, or nil.
func (f *Forwarder) client() *grpc.ClientConn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.conn
}

// forwarding returns the outgoing context of a call to forward, or the
// error that refuses it.
func (f *Forwarder) forwarding(ctx context.Context) (context.Context, *grpc.ClientConn, error) {
	if md, ok := metadata.FromIncomingContext(ctx); ok && len(md.Get(forwardedKey)) > 0 {
		return nil, nil, notServing
	}
	conn := f.client()
	if conn == nil {
		return nil, nil, notServing
	}
	return metadata.AppendToOutgoingContext(ctx, forwardedKey, f.Self), conn, nil
}

// Allocate implements ipam.v1.Ipam by forwarding; the leader's answer,
// error status included, is the caller's.
func (f *Forwarder) Allocate(ctx context.Context, c *ipamv1.Child) (*ipamv1.Prefix, error) {
	out, conn, err := f.forwarding(ctx)
	if err != nil {
		return nil, err
	}
	return ipamv1.NewIpamClient(conn).Allocate(out, c)
}

// Release implements ipam.v1.Ipam by forwarding.
func (f *Forwarder) Release(ctx context.Context, c *ipamv1.Child) (*emptypb.Empty, error) {
	out, conn, err := f.forwarding(ctx)
	if err != nil {
		return nil, err
	}
	return ipamv1.NewIpamClient(conn).Release(out, c)
}

// Run probes the leader every Period until ctx ends.
func (f *Forwarder) Run(ctx context.Context) {
	t := time.NewTicker(f.Period)
	defer t.Stop()
	for {
		f.report(f.probe(ctx))
		select {
		case <-ctx.Done():
			f.report(false)
			f.SetLeader("")
			f.mu.Lock()
			f.closed = true
			f.mu.Unlock()
			return
		case <-t.C:
		}
	}
}

// probe reports whether the leader says its engine serves.
func (f *Forwarder) probe(ctx context.Context) bool {
	conn := f.client()
	if conn == nil {
		return false
	}
	pctx, cancel := context.WithTimeout(ctx, f.Period)
	defer cancel()
	r, err := healthpb.NewHealthClient(conn).Check(pctx, &healthpb.HealthCheckRequest{Service: HealthService})
	return err == nil && r.GetStatus() == healthpb.HealthCheckResponse_SERVING
}

func (f *Forwarder) report(ok bool) {
	f.mu.Lock()
	changed := ok != f.ok
	f.ok = ok
	leader := f.leader
	f.mu.Unlock()
	if !changed {
		return
	}
	f.Logger.Info("IPAM leader reachable for forwarding", "leader", leader, "reachable", ok)
	if f.OnReachable != nil {
		f.OnReachable(ok)
	}
}
