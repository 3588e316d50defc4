package targetstub

import (
	"context"
	"log/slog"
	"net/netip"
	"sync"
	"time"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"google.golang.org/grpc"

	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"

	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
)

// publishClient republishes the target's own addresses after every
// successful Request that carries the VIPs and their policy routes (the
// second request, refresh, heal; not the first, whose answer gives the
// target its addresses but not yet its VIPs: an LB routing a VIP's flows to
// it then would lose them) and withdraws them on Close, so the load
// balancer stubs always route to what the proxy handed out last and to a
// target that answers on the VIPs. It also announces the addresses on the
// NSM interface (gratuitous ARP / unsolicited NA), a few times over the next
// seconds, because they may have belonged to a target that left: the LBs and
// the proxy would otherwise keep sending to the old MAC until their
// neighbour entries expire.
type publishClient struct {
	board          targetaddrs.Board // nil: no publication
	name           string
	vips           []netip.Addr
	nsPath, ifname string

	mu   sync.Mutex
	stop chan struct{} // closed by Close to end the announcement bursts
	wg   sync.WaitGroup
}

// announceRounds are the delays of the announcements after a Request: the
// proxy joins the interface's far end to its bridge asynchronously.
var announceRounds = []time.Duration{0, 300 * time.Millisecond, time.Second, 2 * time.Second}

func (p *publishClient) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	if err != nil {
		return conn, err
	}
	addrs := ownAddrs(conn, p.vips)
	if len(addrs) > 0 && p.board != nil && carriesVIPs(conn, p.vips) {
		if perr := p.board.Publish(ctx, p.name, addrs); perr != nil {
			slog.Warn("publish target addresses", "target", p.name, "error", perr)
		}
	}
	if len(addrs) > 0 && p.ifname != "" {
		p.announce(addrs)
	}
	return conn, nil
}

func (p *publishClient) announce(addrs []netip.Addr) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.stop == nil {
		p.stop = make(chan struct{})
	}
	stop := p.stop
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for _, d := range announceRounds {
			t := time.NewTimer(d)
			select {
			case <-stop:
				t.Stop()
				return
			case <-t.C:
			}
			if err := p.announceOnce(addrs); err != nil {
				slog.Debug("announce target addresses", "target", p.name, "error", err)
			}
		}
	}()
}

func (p *publishClient) announceOnce(addrs []netip.Addr) error {
	ns := netns.None()
	if p.nsPath != "" {
		var err error
		if ns, err = netns.GetFromPath(p.nsPath); err != nil {
			return err
		}
		defer ns.Close()
	}
	return dataplane.Announce(ns, p.ifname, addrs)
}

func (p *publishClient) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*empty.Empty, error) {
	p.mu.Lock()
	if p.stop != nil {
		close(p.stop)
		p.stop = nil
	}
	p.mu.Unlock()
	p.wg.Wait()
	if p.board != nil {
		if err := p.board.Withdraw(ctx, p.name); err != nil {
			slog.Warn("withdraw target addresses", "target", p.name, "error", err)
		}
	}
	return next.Client(ctx).Close(ctx, conn, opts...)
}
