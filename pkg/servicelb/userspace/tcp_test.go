package userspace

import (
	"net"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace/relay"
)

// TestAcceptedConnectionsKeepAlive checks the kernel state of an accepted
// connection: it has the listener's keepalive settings, which Go no longer
// sets per connection.
func TestAcceptedConnectionsKeepAlive(t *testing.T) {
	sock, err := NewProxySocket(servicelb.TCP, netip.MustParseAddr("127.0.0.1"), 0)
	require.NoError(t, err)
	defer sock.Close()
	l := sock.(*tcpSocket).l
	c, err := net.Dial("tcp", l.Addr().String())
	require.NoError(t, err)
	defer c.Close()
	in, err := l.AcceptTCP()
	require.NoError(t, err)
	defer in.Close()

	rc, err := in.SyscallConn()
	require.NoError(t, err)
	got := map[string]int{}
	require.NoError(t, rc.Control(func(fd uintptr) {
		for name, o := range map[string][2]int{
			"SO_KEEPALIVE":  {unix.SOL_SOCKET, unix.SO_KEEPALIVE},
			"TCP_KEEPIDLE":  {unix.IPPROTO_TCP, unix.TCP_KEEPIDLE},
			"TCP_KEEPINTVL": {unix.IPPROTO_TCP, unix.TCP_KEEPINTVL},
			"TCP_KEEPCNT":   {unix.IPPROTO_TCP, unix.TCP_KEEPCNT},
		} {
			v, err := unix.GetsockoptInt(int(fd), o[0], o[1])
			require.NoError(t, err, name)
			got[name] = v
		}
	}))
	require.Equal(t, map[string]int{"SO_KEEPALIVE": 1, "TCP_KEEPIDLE": relay.KeepAliveIdleSeconds,
		"TCP_KEEPINTVL": relay.KeepAliveIntervalSeconds, "TCP_KEEPCNT": relay.KeepAliveCount}, got)
}

func TestClientOf(t *testing.T) {
	for _, c := range []struct {
		addr net.Addr
		want string
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.0.0.1"), Port: 80}, "10.0.0.1:80"},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.0.0.1"), Port: 80}, "10.0.0.1:80"},
		{&net.UDPAddr{IP: net.ParseIP("fd00::1"), Port: 53}, "[fd00::1]:53"},
		{(*net.TCPAddr)(nil), "invalid AddrPort"},
		{&net.UnixAddr{Name: "/x", Net: "unix"}, "invalid AddrPort"},
	} {
		require.Equal(t, c.want, clientOf(c.addr).String(), "%v", c.addr)
	}
}
