package proxy

import (
	"context"
	"net/netip"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
)

// benchLink sets up a connection and announces its interface (index).
func benchLink(b *testing.B, p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	require.NoError(b, p.SetIPContext(context.Background(), conn, t))
	benchRelink(p, index, conn, t)
}

func benchRelink(p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	id, _ := connID(conn, t)
	ipc := conn.GetContext().GetIpContext()
	nb := ipc.GetDstIpAddrs()
	if t == TargetConn {
		nb = ipc.GetSrcIpAddrs()
	}
	var hops []netip.Addr
	for _, s := range nb {
		hops = append(hops, netip.MustParsePrefix(s).Addr())
	}
	p.InterfaceCreated(Interface{Index: index, Name: "x", Type: t, ConnID: id, NeighborAddrs: hops})
}

func benchUnlink(p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	id, _ := connID(conn, t)
	p.InterfaceDeleted(Interface{Index: index, Type: t, ConnID: id})
}
