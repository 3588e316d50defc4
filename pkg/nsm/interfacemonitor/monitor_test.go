package interfacemonitor_test

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/nsm/interfacemonitor"
	"github.com/causeway-net/causeway/pkg/proxy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

type recorder struct {
	mu     sync.Mutex
	events []string
	last   proxy.Interface
}

func (r *recorder) InterfaceCreated(i proxy.Interface) { r.add("created", i) }
func (r *recorder) InterfaceDeleted(i proxy.Interface) { r.add("deleted", i) }

func (r *recorder) add(op string, i proxy.Interface) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, fmt.Sprintf("%s %s %d %s", op, i.Name, i.Index, i.ConnID))
	r.last = i
}

func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.events
	r.events = nil
	return out
}

func lbIface(id, name string, nexthop string) proxy.Interface {
	return proxy.Interface{
		Name: name, Type: proxy.LBConn, ConnID: id,
		LocalAddrs:    []netip.Prefix{netip.MustParsePrefix("172.16.1.1/24")},
		NeighborAddrs: []netip.Addr{netip.MustParseAddr(nexthop)},
	}
}

func TestLinkAfterExpect(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	require.Empty(t, r.take())
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 3, Name: "other"})
	require.Empty(t, r.take())
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.take())
	require.Equal(t, []netip.Addr{netip.MustParseAddr("172.16.1.2")}, r.last.NeighborAddrs)
	require.Equal(t, proxy.LBConn, r.last.Type)
	// The same link reported again (e.g. flags change) is not announced twice.
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.Empty(t, r.take())
}

func TestLinkBeforeExpect(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.Empty(t, r.take())
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.take())
}

func TestRename(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 5, Name: "tmp-veth"})
	require.Empty(t, r.take())
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 5, Name: "nsm-1"})
	require.Equal(t, []string{"created nsm-1 5 c1"}, r.take())
	// Renamed away: no longer the connection's interface.
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 5, Name: "gone"})
	require.Equal(t, []string{"deleted nsm-1 5 c1"}, r.take())
}

func TestRefresh(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.take())

	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	require.Empty(t, r.take(), "an unchanged refresh announces nothing")

	m.Expect(lbIface("c1", "nsm-1", "172.16.1.9"))
	require.Equal(t, []string{"deleted nsm-1 7 c1", "created nsm-1 7 c1"}, r.take())
	require.Equal(t, []netip.Addr{netip.MustParseAddr("172.16.1.9")}, r.last.NeighborAddrs)

	// A heal that moves the connection to another interface name.
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 8, Name: "nsm-2"})
	m.Expect(lbIface("c1", "nsm-2", "172.16.1.9"))
	require.Equal(t, []string{"deleted nsm-1 7 c1", "created nsm-2 8 c1"}, r.take())
}

func TestCloseBeforeLink(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	m.Forget(proxy.LBConn, "c1")
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.Empty(t, r.take())
}

func TestKernelDeleteThenRecreate(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.take())

	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1", Deleted: true})
	require.Equal(t, []string{"deleted nsm-1 7 c1"}, r.take())
	require.Equal(t, []netip.Addr{netip.MustParseAddr("172.16.1.2")}, r.last.NeighborAddrs, "the delete carries the connection's data")
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1", Deleted: true})
	require.Empty(t, r.take(), "a delete is announced once")

	// The connection lives on; a heal creates the link again.
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 9, Name: "nsm-1"})
	require.Equal(t, []string{"created nsm-1 9 c1"}, r.take())

	m.Forget(proxy.LBConn, "c1")
	require.Equal(t, []string{"deleted nsm-1 9 c1"}, r.take())
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 9, Name: "nsm-1", Deleted: true})
	m.Forget(proxy.LBConn, "c1")
	require.Empty(t, r.take())
}

func TestMissedDeleteSameNameNewIndex(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 7, Name: "nsm-1"})
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 11, Name: "nsm-1"})
	require.Equal(t, []string{"created nsm-1 7 c1", "deleted nsm-1 7 c1", "created nsm-1 11 c1"}, r.take())
}

func TestTargetAndLBWithSameIDAreDistinct(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	tgt := lbIface("x", "nsm-t", "172.16.1.5")
	tgt.Type = proxy.TargetConn
	m.Expect(tgt)
	m.Expect(lbIface("x", "nsm-l", "172.16.1.2"))
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 1, Name: "nsm-t"})
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 2, Name: "nsm-l"})
	m.Forget(proxy.TargetConn, "x")
	require.Equal(t, []string{"created nsm-t 1 x", "created nsm-l 2 x", "deleted nsm-t 1 x"}, r.take())
}

func TestRun(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.Expect(lbIface("c1", "nsm-1", "172.16.1.2"))
	events := make(chan interfacemonitor.LinkEvent)
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), events) }()
	events <- interfacemonitor.LinkEvent{Index: 4, Name: "nsm-1"}
	close(events)
	require.ErrorIs(t, <-done, interfacemonitor.ErrSourceClosed)
	require.Equal(t, []string{"created nsm-1 4 c1"}, r.take())

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- m.Run(ctx, make(chan interfacemonitor.LinkEvent)) }()
	cancel()
	require.NoError(t, <-done)
}

func kernelConn(id, name string) *networkservice.Connection {
	return &networkservice.Connection{
		Id: id,
		Mechanism: &networkservice.Mechanism{
			Cls: "LOCAL", Type: kernelmech.MECHANISM,
			Parameters: map[string]string{kernelmech.InterfaceNameKey: name},
		},
		Context: &networkservice.ConnectionContext{IpContext: &networkservice.IPContext{
			SrcIpAddrs:    []string{"172.16.0.10/24"},
			DstIpAddrs:    []string{"172.16.0.20/24"},
			ExtraPrefixes: []string{"172.16.0.1/24"},
		}},
	}
}

func TestServerElement(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	srv := chain.NewNetworkServiceServer(metadata.NewServer(), interfacemonitor.NewServer(m))
	conn, err := srv.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 12, Name: "nsm-t1"})
	require.Equal(t, []string{"created nsm-t1 12 t1"}, r.take())
	require.Equal(t, proxy.TargetConn, r.last.Type)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("172.16.0.20/24")}, r.last.LocalAddrs, "the proxy is the Dst side of a target connection")
	require.Equal(t, []netip.Addr{netip.MustParseAddr("172.16.0.10")}, r.last.NeighborAddrs)

	_, err = srv.Close(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, []string{"deleted nsm-t1 12 t1"}, r.take())
}

func TestClientElement(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 13, Name: "nsm-l1"})
	cli := chain.NewNetworkServiceClient(metadata.NewClient(), interfacemonitor.NewClient(m))
	conn, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: kernelConn("l1", "nsm-l1")})
	require.NoError(t, err)
	require.Equal(t, []string{"created nsm-l1 13 l1"}, r.take())
	require.Equal(t, proxy.LBConn, r.last.Type)
	require.Equal(t, []netip.Prefix{netip.MustParsePrefix("172.16.0.10/24")}, r.last.LocalAddrs, "the proxy is the Src side of an lb connection")
	require.Equal(t, []netip.Addr{netip.MustParseAddr("172.16.0.20")}, r.last.NeighborAddrs)

	_, err = cli.Close(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, []string{"deleted nsm-l1 13 l1"}, r.take())
}

func TestElementWithoutKernelMechanismRecordsNothing(t *testing.T) {
	r := &recorder{}
	m := interfacemonitor.New(r)
	cli := chain.NewNetworkServiceClient(metadata.NewClient(), interfacemonitor.NewClient(m))
	_, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "x"}})
	require.NoError(t, err)
	m.HandleLinkEvent(interfacemonitor.LinkEvent{Index: 1, Name: ""})
	require.Empty(t, r.take())
}

// The proxy is the Handler the monitor is built for.
var _ interfacemonitor.Handler = (*proxy.Proxy)(nil)
