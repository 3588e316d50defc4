package traffic

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// Freebind is a socket Control function (net.ListenConfig, net.Dialer) that
// lets the socket bind to an address that is not (yet) on an interface, as
// a target's VIP may be while the forwarder sets it up.
func Freebind(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if strings.HasSuffix(network, "6") {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_FREEBIND, 1)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_FREEBIND, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// dialer is a net.Dialer bound to local (any address when invalid).
func dialer(network string, local netip.Addr, timeout time.Duration) *net.Dialer {
	d := &net.Dialer{Timeout: timeout, Control: Freebind}
	if local.IsValid() {
		if network == "tcp" {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		} else {
			d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
		}
	}
	return d
}

// dialIn connects (TCP) or opens a connected socket (UDP) from inside the
// namespace at nsPath; the socket stays in that namespace.
func dialIn(ctx context.Context, nsPath, network string, local netip.Addr, addr netip.AddrPort, timeout time.Duration) (net.Conn, error) {
	var c net.Conn
	err := netnsdo.DoPath(nsPath, func() error {
		var err error
		c, err = dialer(network, local, timeout).DialContext(ctx, network, addr.String())
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", network, addr, err)
	}
	return c, nil
}

// Ask opens one flow from local (any address when invalid) inside the
// namespace at nsPath to addr over network ("tcp", or "udp" where it sends
// one datagram) and returns the name the echo target answers with; timeout
// bounds the connection and the answer.
func Ask(ctx context.Context, nsPath, network string, local netip.Addr, addr netip.AddrPort, timeout time.Duration) (string, error) {
	switch network {
	case "tcp":
		return askTCP(ctx, nsPath, local, addr, timeout)
	case "udp":
		c, err := dialIn(ctx, nsPath, "udp", local, addr, timeout)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return askUDP(c, addr, 1, timeout)
	default:
		return "", fmt.Errorf("unknown network %q", network)
	}
}

// askTCP connects and reads the answering target's name.
func askTCP(ctx context.Context, nsPath string, local netip.Addr, addr netip.AddrPort, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	c, err := dialIn(ctx, nsPath, "tcp", local, addr, timeout)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)
	return readName(c, "tcp", addr)
}

// askUDP sends up to attempts datagrams over one socket (one flow) until a
// target answers within timeout each.
func askUDP(c net.Conn, addr netip.AddrPort, attempts int, timeout time.Duration) (string, error) {
	var err error
	for range max(attempts, 1) {
		_ = c.SetDeadline(time.Now().Add(timeout))
		if _, werr := c.Write([]byte("hello\n")); werr != nil {
			return "", fmt.Errorf("udp %s from %s: send: %w", addr, c.LocalAddr(), werr)
		}
		var name string
		name, err = readName(c, "udp", addr)
		if err == nil {
			return name, nil
		}
	}
	return "", err
}

func readName(c net.Conn, network string, addr netip.AddrPort) (string, error) {
	line, err := bufio.NewReader(c).ReadString('\n')
	name := strings.TrimSpace(line)
	if err == nil && name == "" {
		err = errors.New("empty answer")
	}
	if err != nil {
		return "", fmt.Errorf("%s %s from %s: read: %w", network, addr, c.LocalAddr(), err)
	}
	return name, nil
}
