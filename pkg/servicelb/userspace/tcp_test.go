package userspace

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/internal/slbtest"
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

// TestTCPProxyLoopReturnsOnClose: a TCP socket's ProxyLoop returns when its
// listener closes, not when its connections end; a connection in flight
// goes on until CloseConnections, which ends it. Both TCP sockets, on the
// loopback of the test's namespace.
func TestTCPProxyLoopReturnsOnClose(t *testing.T) {
	backend, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var served sync.WaitGroup
	defer func() {
		_ = backend.Close()
		served.Wait()
	}()
	served.Add(1)
	go func() {
		defer served.Done()
		for {
			c, err := backend.Accept()
			if err != nil {
				return
			}
			served.Add(1)
			go func() {
				defer served.Done()
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	svc := servicelb.ServicePortName{Namespace: "test", Name: "echo", Port: "p"}
	lb := servicelb.NewLoadBalancerRR()
	lb.OnEndpointsUpdate([]servicelb.Endpoints{{Namespace: svc.Namespace, Name: svc.Name, Ports: []servicelb.EndpointPort{
		{Name: svc.Port, Addresses: []netip.AddrPort{netip.MustParseAddrPort(backend.Addr().String())}}}}})
	loop, err := relay.Start(relay.Config{Log: slbtest.Logger()})
	require.NoError(t, err)
	defer func() { require.NoError(t, loop.Close()) }()
	var d net.Dialer
	info := &ServiceInfo{Recorder: servicelb.NewLogRecorder(slbtest.Logger()), Dial: d.DialContext, Log: slbtest.Logger()}

	for name, makeSocket := range map[string]ProxySocketFunc{"portable": NewProxySocket, "relay": relaySockets(loop)} {
		t.Run(name, func(t *testing.T) {
			sock, err := makeSocket(servicelb.TCP, netip.MustParseAddr("127.0.0.1"), 0)
			require.NoError(t, err)
			cc := sock.(ConnectionCloser)
			defer cc.CloseConnections() // lets a loop that waits for them go when the test failed
			returned := make(chan struct{})
			go func() {
				defer close(returned)
				sock.ProxyLoop(svc, info, lb)
			}()
			defer func() { <-returned }()
			c, err := net.Dial("tcp", sock.Addr().String())
			require.NoError(t, err)
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(closeGuard))
			r := bufio.NewReader(c)
			echo := func(msg string) error {
				if _, err := io.WriteString(c, msg+"\n"); err != nil {
					return err
				}
				got, err := r.ReadString('\n')
				if err == nil && got != msg+"\n" {
					err = fmt.Errorf("echoed %q", got)
				}
				return err
			}
			require.NoError(t, echo("before"))

			require.NoError(t, sock.Close())
			select {
			case <-returned:
			case <-time.After(closeGuard):
				t.Fatalf("ProxyLoop still running %v after Close: it waits for its connection", closeGuard)
			}
			require.NoError(t, echo("after"), "the connection in flight goes on after the loop")
			require.Equal(t, 1, cc.Connections())

			cc.CloseConnections()
			require.Zero(t, cc.Connections())
			err = echo("closed")
			require.Error(t, err, "CloseConnections left the connection open")
			require.False(t, slbtest.IsTimeout(err), "CloseConnections left the connection open")
		})
	}
}
