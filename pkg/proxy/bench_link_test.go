package proxy

import (
	"context"
	"testing"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"
)

// benchLink sets up a connection and announces its link (index).
func benchLink(b *testing.B, p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	require.NoError(b, p.SetIPContext(context.Background(), conn, t))
	benchRelink(p, index, conn, t)
}

func benchRelink(p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	key, _ := ConnKey(conn, t)
	p.InterfaceCreated(Interface{Index: index, Name: "x", Type: t, ConnKey: key})
}

func benchUnlink(p *Proxy, index int, conn *networkservice.Connection, t ConnType) {
	key, _ := ConnKey(conn, t)
	p.InterfaceDeleted(Interface{Index: index, Type: t, ConnKey: key})
}
