package traffic

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// Arrival is one egress datagram as the listener saw it.
type Arrival struct {
	// Iface is the interface it came in on (the LB link in the external host).
	Iface string
	// Src is its source address and port (a VIP for target egress).
	Src netip.AddrPort
	// Tag is the sender's tag (see EgressFlows.Tag).
	Tag string
	// At is when it arrived.
	At time.Time
}

// EgressListener receives UDP datagrams on a port, IPv4 and IPv6, in a
// namespace and records the source and the ingress interface of each, so
// that a test can tell over which link (which LB) egress flows arrived.
type EgressListener struct {
	port    int
	conns   []*net.UDPConn // IPv4, IPv6
	markers []*net.UDPConn // on loopback, one per conn: see Sync
	links   *netlink.Handle
	wg      sync.WaitGroup

	mu       sync.Mutex
	arrivals []Arrival
	names    map[int]string
	synced   []int // per conn, the last sync marker read
}

// syncTag prefixes the listener's own markers (Sync), which are not
// arrivals.
const syncTag = "egress-listener-sync#"

// pktinfo asks for the ingress interface of every datagram.
func pktinfo(network, _ string, c syscall.RawConn) error {
	var serr error
	err := c.Control(func(fd uintptr) {
		if network == "udp6" {
			serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IPV6, unix.IPV6_RECVPKTINFO, 1)
			return
		}
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_IP, unix.IP_PKTINFO, 1)
	})
	if err != nil {
		return err
	}
	return serr
}

// ListenEgress listens on UDP port, any address, IPv4 and IPv6, in the
// namespace at nsPath until Close.
func ListenEgress(nsPath string, port int) (_ *EgressListener, err error) {
	l := &EgressListener{port: port, names: map[int]string{}, synced: []int{0, 0}}
	defer func() {
		if err != nil {
			l.Close()
		}
	}()
	if l.links, err = netnsdo.NetlinkHandle(nsPath); err != nil {
		return nil, fmt.Errorf("egress listener: %w", err)
	}
	lc := net.ListenConfig{Control: pktinfo}
	err = netnsdo.DoPath(nsPath, func() error {
		for _, network := range []string{"udp4", "udp6"} {
			host := "0.0.0.0"
			if network == "udp6" {
				host = "::"
			}
			pc, err := lc.ListenPacket(context.Background(), network, net.JoinHostPort(host, strconv.Itoa(port)))
			if err != nil {
				return fmt.Errorf("egress listener: %s port %d: %w", network, port, err)
			}
			l.conns = append(l.conns, pc.(*net.UDPConn))
			loop := "127.0.0.1:0"
			if network == "udp6" {
				loop = "[::1]:0"
			}
			mc, err := net.ListenPacket(network, loop)
			if err != nil {
				return fmt.Errorf("egress listener: %s sync marker on loopback: %w", network, err)
			}
			l.markers = append(l.markers, mc.(*net.UDPConn))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, c := range l.conns {
		l.wg.Add(1)
		go l.serve(i, c)
	}
	return l, nil
}

func (l *EgressListener) serve(i int, c *net.UDPConn) {
	defer l.wg.Done()
	buf := make([]byte, 1500)
	oob := make([]byte, 256)
	for {
		n, oobn, _, src, err := c.ReadMsgUDPAddrPort(buf, oob)
		if err != nil {
			if !errors.Is(err, net.ErrClosed) {
				slog.Warn("egress listener read", "error", err)
			}
			return
		}
		tag := strings.TrimSpace(string(buf[:n]))
		if seq, ok := strings.CutPrefix(tag, syncTag); ok {
			l.mu.Lock()
			l.synced[i], _ = strconv.Atoi(seq)
			l.mu.Unlock()
			continue
		}
		a := Arrival{Src: netip.AddrPortFrom(src.Addr().Unmap(), src.Port()), Tag: tag, At: time.Now()}
		if idx := ifindex(oob[:oobn]); idx > 0 {
			a.Iface = l.ifname(idx)
		}
		l.mu.Lock()
		l.arrivals = append(l.arrivals, a)
		l.mu.Unlock()
	}
}

// ifindex extracts the ingress interface index from IP(V6)_PKTINFO.
func ifindex(oob []byte) int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return 0
	}
	for _, m := range msgs {
		switch {
		case m.Header.Level == unix.IPPROTO_IP && m.Header.Type == unix.IP_PKTINFO && len(m.Data) >= unix.SizeofInet4Pktinfo:
			// struct in_pktinfo starts with the interface index.
			return int(int32(binary.NativeEndian.Uint32(m.Data[0:4])))
		case m.Header.Level == unix.IPPROTO_IPV6 && m.Header.Type == unix.IPV6_PKTINFO && len(m.Data) >= unix.SizeofInet6Pktinfo:
			// struct in6_pktinfo: the 16-byte address, then the index.
			return int(binary.NativeEndian.Uint32(m.Data[16:20]))
		}
	}
	return 0
}

// ifname resolves an interface index of the listener's namespace, cached so
// that a link that goes away later keeps its name in the records.
func (l *EgressListener) ifname(idx int) string {
	l.mu.Lock()
	name, ok := l.names[idx]
	l.mu.Unlock()
	if ok {
		return name
	}
	link, err := l.links.LinkByIndex(idx)
	if err != nil {
		return "if" + strconv.Itoa(idx)
	}
	name = link.Attrs().Name
	l.mu.Lock()
	l.names[idx] = name
	l.mu.Unlock()
	return name
}

// Arrivals is a copy of what arrived so far.
func (l *EgressListener) Arrivals() []Arrival {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]Arrival(nil), l.arrivals...)
}

// ByIface counts the arrivals with the given tag (any when empty) per
// ingress interface.
func (l *EgressListener) ByIface(tag string) map[string]int {
	m := map[string]int{}
	for _, a := range l.Arrivals() {
		if tag == "" || a.Tag == tag {
			m[a.Iface]++
		}
	}
	return m
}

// Sync returns once every datagram that reached the listener's sockets
// before the call is among its arrivals, however late its readers run (a
// busy machine): it sends a marker to each socket over loopback and waits
// until the reader has read it, the queue being in order. It returns the
// time the markers were sent.
func (l *EgressListener) Sync(timeout time.Duration) (time.Time, error) {
	l.mu.Lock()
	seq := slices.Max(l.synced) + 1
	l.mu.Unlock()
	at := time.Now()
	for _, m := range l.markers {
		// The marker is bound to its family's loopback address: to the
		// listener's port there.
		to := netip.AddrPortFrom(m.LocalAddr().(*net.UDPAddr).AddrPort().Addr().Unmap(), uint16(l.port))
		if _, err := m.WriteToUDPAddrPort([]byte(syncTag+strconv.Itoa(seq)), to); err != nil {
			return at, fmt.Errorf("egress listener sync: %w", err)
		}
	}
	deadline := time.Now().Add(timeout)
	for {
		l.mu.Lock()
		done := slices.Min(l.synced) >= seq
		l.mu.Unlock()
		if done {
			return at, nil
		}
		if time.Now().After(deadline) {
			return at, fmt.Errorf("egress listener sync: the readers did not read their marker within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

// Close stops the listener and waits for its readers.
func (l *EgressListener) Close() {
	for _, c := range l.markers {
		_ = c.Close()
	}
	for _, c := range l.conns {
		_ = c.Close()
	}
	l.wg.Wait()
	if l.links != nil {
		l.links.Close()
	}
}

// EgressFlows describes target-originated flows.
type EgressFlows struct {
	// NetNSPath is the sender's namespace (a target's).
	NetNSPath string
	// Src is the source address (a VIP the target carries).
	Src netip.Addr
	// Dst is the listener's address and port (the external host).
	Dst netip.AddrPort
	// Count is the number of flows, each from its own source port.
	Count int
	// Tag is the payload, by which the listener's records are told apart.
	Tag string
}

// SendEgress sends one datagram per flow, each from its own socket with the
// source address f.Src, and returns how many were sent.
func SendEgress(ctx context.Context, f EgressFlows) (int, error) {
	if !f.Src.IsValid() || !f.Dst.IsValid() || f.Count <= 0 {
		return 0, fmt.Errorf("egress flows: source, destination and a positive count are required")
	}
	sent := 0
	for range f.Count {
		if err := ctx.Err(); err != nil {
			return sent, err
		}
		if err := sendEgress(ctx, f, f.Tag); err != nil {
			return sent, err
		}
		sent++
	}
	return sent, nil
}

// sendEgress sends one datagram with the payload tag from a new socket
// with the source address f.Src.
func sendEgress(ctx context.Context, f EgressFlows, tag string) error {
	c, err := dialIn(ctx, f.NetNSPath, "udp", f.Src, f.Dst, time.Second)
	if err != nil {
		return fmt.Errorf("egress from %s: %w", f.Src, err)
	}
	_, err = c.Write([]byte(tag + "\n"))
	_ = c.Close()
	if err != nil {
		return fmt.Errorf("egress from %s to %s: %w", f.Src, f.Dst, err)
	}
	return nil
}

// DeliverEgress sends f.Count flows and, while fewer than f.Count datagrams
// tagged f.Tag have arrived at l, sends as many new flows as are missing,
// a round every resend, until they have or ctx ends. A datagram may be lost
// without any fault of the path under test (a socket buffer full while a busy
// machine delays its reader, a neighbour entry's queue), so a count of
// arrivals is taken after the lost ones were sent again. It returns how many
// flows it sent in all; the error is ctx's, or a send's.
func DeliverEgress(ctx context.Context, l *EgressListener, f EgressFlows, resend time.Duration) (int, error) {
	want := f.Count
	sent := 0
	for {
		missing := want - l.count(f.Tag)
		if missing <= 0 {
			return sent, nil
		}
		if sent > 0 {
			slog.Info("egress datagrams not arrived, sending new flows", "tag", f.Tag, "missing", missing, "sent", sent)
		}
		f.Count = missing
		n, err := SendEgress(ctx, f)
		sent += n
		if err != nil {
			return sent, err
		}
		if err := l.await(ctx, f.Tag, want, resend); err != nil {
			return sent, err
		}
	}
}

// await waits until want datagrams tagged tag have arrived, for at most
// d, or until ctx ends (its error).
func (l *EgressListener) await(ctx context.Context, tag string, want int, d time.Duration) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.Now().Add(d)
	for l.count(tag) < want && time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return nil
}

// count is the number of arrivals with the tag.
func (l *EgressListener) count(tag string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.arrivals {
		if a.Tag == tag {
			n++
		}
	}
	return n
}
