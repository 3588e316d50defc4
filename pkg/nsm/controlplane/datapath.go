package controlplane

import (
	"context"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/common/heal"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/vishvananda/netlink"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"
)

// dataPathPatience is how long a heal may re-request a connection as it
// is on the strength of its interface alone (see dataPathFirst); after
// that the NSMgr's word decides.
const dataPathPatience = 20 * time.Second

// dataPathFirst is the lab clients' heal check. NSM's own client decides by
// its data path whether a connection that the control plane reported down
// is alive (it pings the connection's addresses) and, if it is, re-requests
// it as it is. A lab client's connection is alive while its kernel
// interface is there and up: it is one end of a veth whose other end is a
// port of the endpoint's namespace (the proxy's bridge), so the data path
// lives as long as both namespaces do, with or without the endpoint's
// process. (A ping would not do: a target's sources include its VIPs, to
// which the proxy's namespace has no way back.)
//
// So an endpoint restarted in its namespace (the proxy's container
// restarted in its pod), which the NSMgr reports down when its process
// goes, is re-requested as it is, and its new run takes the connection
// over with its interface and addresses; reselecting would close the
// connection first, and the forwarder would delete the veth. An endpoint
// that went with its namespace took the veth with it, and the NSMgr's word
// decides (pkg/nsm/chain/liveness). A heal that has gone on for
// dataPathPatience with the interface up is left to the NSMgr's word too:
// an endpoint that does not come back (its pod replaced while something
// still holds its old namespace) is then reselected.
//
// It is also the chain element that ends a heal's count: a connection
// established (or closed) starts afresh.
type dataPathFirst struct {
	nsmgr    heal.LivenessCheck
	up       func(*networkservice.Connection) bool
	patience time.Duration
	now      func() time.Time

	mu    sync.Mutex
	since map[string]time.Time // connection id → first check of its heal
}

func newDataPathFirst(nsmgr heal.LivenessCheck) *dataPathFirst {
	return &dataPathFirst{nsmgr: nsmgr, up: kernelLinkUp, patience: dataPathPatience, now: time.Now,
		since: make(map[string]time.Time)}
}

// check is the heal.LivenessCheck.
func (d *dataPathFirst) check(ctx context.Context, conn *networkservice.Connection) bool {
	if d.up(conn) && d.patient(conn.GetId()) {
		return true
	}
	return d.nsmgr(ctx, conn)
}

// patient reports whether the heal of id started less than patience ago
// (its first check starts it).
func (d *dataPathFirst) patient(id string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	first, ok := d.since[id]
	if !ok {
		d.since[id] = now
		return true
	}
	return now.Sub(first) < d.patience
}

func (d *dataPathFirst) forget(id string) {
	d.mu.Lock()
	delete(d.since, id)
	d.mu.Unlock()
}

func (d *dataPathFirst) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return nil, err
	}
	d.forget(conn.GetId())
	return conn, nil
}

func (d *dataPathFirst) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	d.forget(conn.GetId())
	return next.Client(ctx).Close(ctx, conn, opts...)
}

// kernelLinkUp reports whether the connection's kernel interface is there
// and up (operationally: a veth whose peer is up too). A check that cannot
// tell says not up.
func kernelLinkUp(conn *networkservice.Connection) bool {
	km := kernelmech.ToMechanism(conn.GetMechanism())
	if km == nil || km.GetInterfaceName() == "" {
		return false
	}
	h, err := handleFor(km.GetNetNSURL())
	if err != nil {
		return false
	}
	defer h.Close()
	l, err := h.LinkByName(km.GetInterfaceName())
	return err == nil && l.Attrs().OperState == netlink.OperUp
}
