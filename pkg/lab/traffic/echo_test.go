package traffic_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/netip"
	"strconv"
	"sync"
	"testing"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// echo is a tiny target: TCP and UDP on addr:port answering "<name>\n";
// TCP then echoes what the peer sends.
type echo struct {
	l  net.Listener
	pc net.PacketConn
	wg sync.WaitGroup
}

func startEcho(t *testing.T, nsPath, name string, addr netip.Addr, port int) {
	t.Helper()
	e := &echo{}
	hostPort := net.JoinHostPort(addr.String(), strconv.Itoa(port))
	lc := net.ListenConfig{Control: traffic.Freebind}
	err := netnsdo.DoPath(nsPath, func() error {
		var err error
		if e.l, err = lc.Listen(context.Background(), "tcp4", hostPort); err != nil {
			return err
		}
		e.pc, err = lc.ListenPacket(context.Background(), "udp4", hostPort)
		return err
	})
	if err != nil {
		t.Fatalf("echo %s on %s: %v", name, hostPort, err)
	}
	e.wg.Add(2)
	go func() {
		defer e.wg.Done()
		for {
			c, err := e.l.Accept()
			if err != nil {
				return
			}
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				if _, err := c.Write([]byte(name + "\n")); err == nil {
					_, _ = io.Copy(c, c)
				}
			}()
		}
	}()
	go func() {
		defer e.wg.Done()
		buf := make([]byte, 1500)
		for {
			_, from, err := e.pc.ReadFrom(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			if err == nil {
				_, _ = e.pc.WriteTo([]byte(name+"\n"), from)
			}
		}
	}()
	t.Cleanup(func() {
		_ = e.l.Close()
		_ = e.pc.Close()
		e.wg.Wait()
	})
}
