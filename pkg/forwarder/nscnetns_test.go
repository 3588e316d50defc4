package forwarder

import (
	"context"
	"testing"

	"github.com/golang/protobuf/ptypes/empty"
	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/chain"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

// closeSeen records the NSC namespace URL that each Close names, and
// whether it opened, while the Close ran, to this process's namespace (as
// connectioncontextkernel would open it).
type closeSeen struct {
	t    *testing.T
	urls []string
	same []bool
}

func (c *closeSeen) Request(ctx context.Context, request *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	return next.Server(ctx).Request(ctx, request)
}

func (c *closeSeen) Close(ctx context.Context, conn *networkservice.Connection) (*empty.Empty, error) {
	u := kernelmech.ToMechanism(conn.GetMechanism()).GetNetNSURL()
	c.urls = append(c.urls, u)
	c.same = append(c.same, sameNetNS(c.t, u))
	return next.Server(ctx).Close(ctx, conn)
}

func nscConn(netnsURL string) *networkservice.Connection {
	m := kernelmech.New(netnsURL)
	kernelmech.ToMechanism(m).SetInterfaceName("nsm-0")
	return &networkservice.Connection{Id: "conn-1", Mechanism: m}
}

// sameNetNS reports whether rawURL opens the namespace of this process.
func sameNetNS(t *testing.T, rawURL string) bool {
	t.Helper()
	h, err := netnsurl.Open(rawURL)
	if err != nil {
		return false
	}
	defer h.Close()
	own, err := netns.Get()
	require.NoError(t, err)
	defer own.Close()
	return h.Equal(own)
}

// TestCloseWithoutDescriptorReachesTheNSCNetNS: a Close whose NSC
// mechanism still names the namespace by its inode (recvfd had no
// descriptor for it: the reaper's Close after a failed Request) reaches
// the rest of the chain with a file URL of the namespace of the last
// successful Request, and the caller gets its connection back as it
// passed it. A Close without an earlier Request, and one with a file URL,
// pass as they are.
func TestCloseWithoutDescriptorReachesTheNSCNetNS(t *testing.T) {
	seen := &closeSeen{t: t}
	s := chain.NewNetworkServiceServer(newNSCNetNS(), seen)
	ctx := context.Background()

	const inode = "inode://4/4026531840"
	_, err := s.Close(ctx, nscConn(inode))
	require.NoError(t, err)
	require.Equal(t, []string{inode}, seen.urls, "no Request, nothing to hand")

	_, err = s.Request(ctx, &networkservice.NetworkServiceRequest{Connection: nscConn("file:///proc/self/ns/net")})
	require.NoError(t, err)
	conn := nscConn(inode)
	_, err = s.Close(ctx, conn)
	require.NoError(t, err)
	require.Len(t, seen.urls, 2)
	require.True(t, seen.same[1], "the Close names the NSC's namespace: %s", seen.urls[1])
	require.Equal(t, inode, kernelmech.ToMechanism(conn.GetMechanism()).GetNetNSURL(), "the caller's connection is left as it was")

	_, err = s.Close(ctx, nscConn(inode))
	require.NoError(t, err)
	require.Equal(t, inode, seen.urls[2], "the handle went with the Close")

	_, err = s.Request(ctx, &networkservice.NetworkServiceRequest{Connection: nscConn("file:///proc/self/ns/net")})
	require.NoError(t, err)
	_, err = s.Close(ctx, nscConn("file:///proc/self/ns/net"))
	require.NoError(t, err)
	require.Equal(t, "file:///proc/self/ns/net", seen.urls[3], "a Close with a file URL passes as it is")

	// A Request whose namespace cannot be opened drops the handle of the
	// one before: the Close after it is not handed a namespace of the past.
	_, err = s.Request(ctx, &networkservice.NetworkServiceRequest{Connection: nscConn("file:///proc/self/ns/net")})
	require.NoError(t, err)
	_, err = s.Request(ctx, &networkservice.NetworkServiceRequest{Connection: nscConn("file:///no/such/netns")})
	require.NoError(t, err)
	_, err = s.Close(ctx, nscConn(inode))
	require.NoError(t, err)
	require.Equal(t, inode, seen.urls[4], "no handle of an earlier Request")
}
