package labtest

import (
	"bufio"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// askTimeout bounds each step of Ask.
const askTimeout = 2 * time.Second

// Ask connects from local inside the namespace at nsPath to an echo stub at
// addr over network ("tcp" or "udp", where it first sends a line) and
// returns the line the stub answers: its name.
func Ask(nsPath, network string, local netip.Addr, addr string) (string, error) {
	var c net.Conn
	err := netnsdo.DoPath(nsPath, func() error {
		d := net.Dialer{Timeout: askTimeout}
		if network == "tcp" {
			d.LocalAddr = &net.TCPAddr{IP: local.AsSlice()}
		} else {
			d.LocalAddr = &net.UDPAddr{IP: local.AsSlice()}
		}
		var err error
		c, err = d.Dial(network, addr)
		return err
	})
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(askTimeout))
	if network == "udp" {
		if _, err := c.Write([]byte("hello\n")); err != nil {
			return "", err
		}
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return strings.TrimSpace(line), err
}
