package connlink_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/utils/metadata"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/dataplane"
	"github.com/causeway-net/causeway/pkg/dataplane/dataplanefake"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink"
	"github.com/causeway-net/causeway/pkg/nsm/chain/connlink/linkstest"
	"github.com/causeway-net/causeway/pkg/proxy"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// newRecorder records events as "op name index key".
func newRecorder() *linkstest.Recorder {
	return &linkstest.Recorder{Format: func(op string, i proxy.Interface) string {
		return fmt.Sprintf("%s %s %d %s", op, i.Name, i.Index, i.ConnKey)
	}}
}

// newMatcher is a matcher over a fake link table, reporting to a recorder.
func newMatcher() (*dataplanefake.Dataplane, *linkstest.Recorder, *connlink.Matcher) {
	links, r := &dataplanefake.Dataplane{}, newRecorder()
	return links, r, connlink.New(r, links)
}

func lbIface(key, name string) proxy.Interface {
	return proxy.Interface{Name: name, Type: proxy.LBConn, ConnKey: key}
}

func TestLinkAfterExpect(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	require.Empty(t, r.Take())
	m.HandleLinkEvent(links.SetLink(3, "other"))
	require.Empty(t, r.Take())
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.Take())
	require.Equal(t, proxy.Interface{Index: 7, Name: "nsm-1", Type: proxy.LBConn, ConnKey: "c1"}, r.Last(),
		"the link of the connection, nothing the proxy knows already")
	// The same link reported again (e.g. flags change) is not announced twice.
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.Empty(t, r.Take())
}

func TestLinkBeforeExpect(t *testing.T) {
	links, r, m := newMatcher()
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.Empty(t, r.Take())
	m.Expect(lbIface("c1", "nsm-1"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.Take())
}

func TestRename(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	m.HandleLinkEvent(links.SetLink(5, "tmp-veth"))
	require.Empty(t, r.Take())
	m.HandleLinkEvent(links.SetLink(5, "nsm-1"))
	require.Equal(t, []string{"created nsm-1 5 c1"}, r.Take())
	// Renamed away: no longer the connection's interface.
	m.HandleLinkEvent(links.SetLink(5, "gone"))
	require.Equal(t, []string{"deleted nsm-1 5 c1"}, r.Take())
}

func TestRefresh(t *testing.T) {
	links, r, m := newMatcher()
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	m.Expect(lbIface("c1", "nsm-1"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.Take())

	m.Expect(lbIface("c1", "nsm-1"))
	require.Empty(t, r.Take(), "a refresh on the same link announces nothing: the addresses are the proxy's")

	// A heal that moves the connection to another interface name.
	m.HandleLinkEvent(links.SetLink(8, "nsm-2"))
	m.Expect(lbIface("c1", "nsm-2"))
	require.Equal(t, []string{"deleted nsm-1 7 c1", "created nsm-2 8 c1"}, r.Take())
}

// An event handled after an Expect that already read the table (the link
// was renamed into place meanwhile) does not undo the match: the table says
// what the link is now.
func TestLateEventAfterExpect(t *testing.T) {
	links, r, m := newMatcher()
	added := links.SetLink(5, "tmp-veth")
	renamed := links.SetLink(5, "nsm-1")
	m.Expect(lbIface("c1", "nsm-1"))
	require.Equal(t, []string{"created nsm-1 5 c1"}, r.Take())
	m.HandleLinkEvent(added)
	m.HandleLinkEvent(renamed)
	require.Empty(t, r.Take())
	require.False(t, m.Lost(proxy.LBConn, "c1"))

	// A link renamed from one connection's name to another's before the
	// rename is handled: the Expect of the second takes it.
	links.SetLink(6, "nsm-a")
	m.Expect(lbIface("a", "nsm-a"))
	rename := links.SetLink(6, "nsm-b")
	m.Expect(lbIface("b", "nsm-b"))
	m.HandleLinkEvent(rename)
	require.Equal(t, []string{"created nsm-a 6 a", "deleted nsm-a 6 a", "created nsm-b 6 b"}, r.Take())
	require.True(t, m.Lost(proxy.LBConn, "a"))
}

func TestCloseBeforeLink(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	m.Forget(proxy.LBConn, "c1")
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.Empty(t, r.Take())
}

func TestKernelDeleteThenRecreate(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	require.Equal(t, []string{"created nsm-1 7 c1"}, r.Take())

	m.HandleLinkEvent(links.DeleteLink(7))
	require.Equal(t, []string{"deleted nsm-1 7 c1"}, r.Take())
	require.Equal(t, proxy.Interface{Index: 7, Name: "nsm-1", Type: proxy.LBConn, ConnKey: "c1"}, r.Last(), "the delete names the connection")
	m.HandleLinkEvent(links.DeleteLink(7))
	require.Empty(t, r.Take(), "a delete is announced once")

	// The connection lives on; a heal creates the link again.
	m.HandleLinkEvent(links.SetLink(9, "nsm-1"))
	require.Equal(t, []string{"created nsm-1 9 c1"}, r.Take())

	m.Forget(proxy.LBConn, "c1")
	require.Equal(t, []string{"deleted nsm-1 9 c1"}, r.Take())
	m.HandleLinkEvent(links.DeleteLink(9))
	m.Forget(proxy.LBConn, "c1")
	require.Empty(t, r.Take())
}

func TestMissedDeleteSameNameNewIndex(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	m.HandleLinkEvent(links.SetLink(7, "nsm-1"))
	m.HandleLinkEvent(links.SetLink(11, "nsm-1"))
	require.Equal(t, []string{"created nsm-1 7 c1", "deleted nsm-1 7 c1", "created nsm-1 11 c1"}, r.Take())
}

func TestTargetAndLBWithSameIDAreDistinct(t *testing.T) {
	links, r, m := newMatcher()
	tgt := lbIface("x", "nsm-t")
	tgt.Type = proxy.TargetConn
	m.Expect(tgt)
	m.Expect(lbIface("x", "nsm-l"))
	m.HandleLinkEvent(links.SetLink(1, "nsm-t"))
	m.HandleLinkEvent(links.SetLink(2, "nsm-l"))
	m.Forget(proxy.TargetConn, "x")
	require.Equal(t, []string{"created nsm-t 1 x", "created nsm-l 2 x", "deleted nsm-t 1 x"}, r.Take())
}

func TestRun(t *testing.T) {
	links, r, m := newMatcher()
	m.Expect(lbIface("c1", "nsm-1"))
	events := make(chan dataplane.LinkEvent)
	done := make(chan error, 1)
	go func() { done <- m.Run(context.Background(), events) }()
	events <- links.SetLink(4, "nsm-1")
	close(events)
	require.ErrorIs(t, <-done, connlink.ErrSourceClosed)
	require.Equal(t, []string{"created nsm-1 4 c1"}, r.Take())

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- m.Run(ctx, make(chan dataplane.LinkEvent)) }()
	cancel()
	require.NoError(t, <-done)
}

// kernelConn is a connection whose own id differs from the id of its first
// path segment (the target's, the key of a target connection).
func kernelConn(id, name string) *networkservice.Connection {
	return &networkservice.Connection{
		Id:   id,
		Path: &networkservice.Path{PathSegments: []*networkservice.PathSegment{{Id: "seg-" + id}, {Id: id}}},
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
	links, r, m := newMatcher()
	srv := chain.NewNetworkServiceServer(metadata.NewServer(), connlink.NewServer(m))
	conn, err := srv.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	m.HandleLinkEvent(links.SetLink(12, "nsm-t1"))
	require.Equal(t, []string{"created nsm-t1 12 seg-t1"}, r.Take(), "a target connection's key is its first path segment's id")
	require.Equal(t, proxy.TargetConn, r.Last().Type)

	_, err = srv.Close(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, []string{"deleted nsm-t1 12 seg-t1"}, r.Take())
}

// A target that heals through another path gets a new proxy-side
// connection id under the same key, on a new interface; the old path's
// connection is closed later (its NSMgr's timeout, or the endpoint's
// expiry). That close withdraws nothing: the interface is the healed
// connection's.
func TestServerCloseOfSupersededConnection(t *testing.T) {
	links, r, m := newMatcher()
	srv := chain.NewNetworkServiceServer(metadata.NewServer(), connlink.NewServer(m))
	old, err := srv.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: kernelConn("t1", "nsm-t1")})
	require.NoError(t, err)
	m.HandleLinkEvent(links.SetLink(12, "nsm-t1"))
	healed := kernelConn("t1-healed", "nsm-t2")
	healed.GetPath().GetPathSegments()[0].Id = "seg-t1"
	healed, err = srv.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: healed})
	require.NoError(t, err)
	m.HandleLinkEvent(links.SetLink(14, "nsm-t2"))
	require.Equal(t, []string{"created nsm-t1 12 seg-t1", "deleted nsm-t1 12 seg-t1", "created nsm-t2 14 seg-t1"}, r.Take())

	_, err = srv.Close(context.Background(), old)
	require.NoError(t, err)
	require.Empty(t, r.Take(), "the old path's close is not the healed connection's")
	m.HandleLinkEvent(links.DeleteLink(14))
	require.True(t, m.Lost(proxy.TargetConn, "seg-t1"), "the healed connection is still expected")

	_, err = srv.Close(context.Background(), healed)
	require.NoError(t, err)
	require.False(t, m.Lost(proxy.TargetConn, "seg-t1"), "forgotten by its own close")
}

func TestClientElement(t *testing.T) {
	links, r, m := newMatcher()
	m.HandleLinkEvent(links.SetLink(13, "nsm-l1"))
	cli := chain.NewNetworkServiceClient(metadata.NewClient(), connlink.NewClient(m))
	conn, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: kernelConn("l1", "nsm-l1")})
	require.NoError(t, err)
	require.Equal(t, []string{"created nsm-l1 13 l1"}, r.Take())
	require.Equal(t, proxy.LBConn, r.Last().Type, "an LB connection's key is its id")

	_, err = cli.Close(context.Background(), conn)
	require.NoError(t, err)
	require.Equal(t, []string{"deleted nsm-l1 13 l1"}, r.Take())
}

func TestElementWithoutKernelMechanismRecordsNothing(t *testing.T) {
	links, r, m := newMatcher()
	cli := chain.NewNetworkServiceClient(metadata.NewClient(), connlink.NewClient(m))
	_, err := cli.Request(context.Background(), &networkservice.NetworkServiceRequest{Connection: &networkservice.Connection{Id: "x"}})
	require.NoError(t, err)
	m.HandleLinkEvent(links.SetLink(1, ""))
	require.Empty(t, r.Take())
}

// The proxy is the Handler the matcher is built for.
var _ connlink.Handler = (*proxy.Proxy)(nil)
