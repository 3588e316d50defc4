package conntrackflush

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"syscall"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/ti-mo/netfilter"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/netnsdo"
)

// A conntrack dump through the library returns the whole table at once:
// every netlink message, then every decoded flow, in memory together. A
// namespace with 50,000 entries made a flush allocate about 150 MB and
// hold a large part of it at once, which set the garbage collector's goal
// (and the RSS) far above the proxy's own needs, on every LB restart. The
// dump here reads the table one receive buffer at a time and keeps only
// the flows that match.

// ctDumpBuffer is the receive buffer of a dump: the kernel fills it with
// as many whole entries as fit (a few hundred bytes each).
const ctDumpBuffer = 64 << 10

// ctDumpTimeout bounds each receive of a dump (the kernel answers at
// once; this only guards against a socket that never does).
const ctDumpTimeout = 30 * time.Second

// FlushMatching deletes, through conn, the conntrack entries of namespace
// ns (the caller's own when ns is not open) that one of whose tuple
// addresses (original or reply, source or destination) addr accepts and
// that match accepts (nil: all of them); entries that expired meanwhile
// are not errors. The table is read in one streamed dump that keeps only
// the matches, and an entry is decoded only once addr accepted it. It
// returns how many entries it deleted.
func FlushMatching(ns netns.NsHandle, conn *conntrack.Conn, addr func(netip.Addr) bool, match func(*conntrack.Flow) bool) (int, error) {
	flows, err := dumpMatching(ns, entryFilter{addr: addr, match: match})
	if err != nil {
		return 0, err
	}
	return deleteFlows(conn, flows)
}

// entryFilter chooses the entries of a dump: a cheap look at the raw
// tuple addresses first, then the decoded flow.
type entryFilter struct {
	addr  func(netip.Addr) bool
	match func(*conntrack.Flow) bool
}

// dumpMatching dumps the conntrack table of ns and returns the flows that
// f accepts (their tuples and zone, what a delete needs).
func dumpMatching(ns netns.NsHandle, f entryFilter) ([]conntrack.Flow, error) {
	var fd int
	if err := netnsdo.Do(netns.NsHandle(nsFD(ns)), func() error {
		var err error
		fd, err = unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.NETLINK_NETFILTER)
		return err
	}); err != nil {
		return nil, fmt.Errorf("conntrack dump socket: %w", err)
	}
	defer unix.Close(fd)
	tv := unix.NsecToTimeval(ctDumpTimeout.Nanoseconds())
	if err := unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv); err != nil {
		return nil, fmt.Errorf("conntrack dump socket timeout: %w", err)
	}
	if err := sendDumpRequest(fd); err != nil {
		return nil, err
	}
	return receiveDump(fd, f)
}

// sendDumpRequest asks for every entry of both families.
func sendDumpRequest(fd int) error {
	req, err := netfilter.MarshalNetlink(netfilter.Header{
		SubsystemID: netfilter.NFSubsysCTNetlink,
		MessageType: netfilter.MessageType(1), // IPCTNL_MSG_CT_GET
		Family:      netfilter.ProtoUnspec,
		Flags:       netlink.Request | netlink.Dump,
	}, nil)
	if err != nil {
		return fmt.Errorf("conntrack dump request: %w", err)
	}
	req.Header.Sequence = 1
	req.Header.Length = uint32(unix.NLMSG_HDRLEN + len(req.Data))
	b, err := req.MarshalBinary()
	if err != nil {
		return fmt.Errorf("conntrack dump request: %w", err)
	}
	if err := unix.Sendto(fd, b, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return fmt.Errorf("conntrack dump request: %w", err)
	}
	return nil
}

// receiveDump reads the dump's answers until its end, decoding one
// receive buffer at a time.
func receiveDump(fd int, f entryFilter) ([]conntrack.Flow, error) {
	buf := make([]byte, ctDumpBuffer)
	var out []conntrack.Flow
	for {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("conntrack dump receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, fmt.Errorf("conntrack dump parse: %w", err)
		}
		for i := range msgs {
			done, err := dumpMessage(&msgs[i], f, &out)
			if err != nil || done {
				return out, err
			}
		}
	}
}

// dumpMessage handles one message of a dump: the end, an error, or an
// entry, appended to out if it matches.
func dumpMessage(m *syscall.NetlinkMessage, f entryFilter, out *[]conntrack.Flow) (done bool, err error) {
	switch m.Header.Type {
	case unix.NLMSG_DONE:
		return true, nil
	case unix.NLMSG_ERROR:
		if len(m.Data) < 4 {
			return true, errors.New("conntrack dump: short error message")
		}
		if errno := -int32(binary.NativeEndian.Uint32(m.Data[:4])); errno != 0 {
			return true, fmt.Errorf("conntrack dump: %w", unix.Errno(errno))
		}
		return true, nil
	}
	if f.addr != nil && !anyTupleAddr(m.Data, f.addr) {
		return false, nil
	}
	var ev conntrack.Event
	msg := netlink.Message{
		Header: netlink.Header{Length: m.Header.Len, Type: netlink.HeaderType(m.Header.Type),
			Flags: netlink.HeaderFlags(m.Header.Flags), Sequence: m.Header.Seq, PID: m.Header.Pid},
		Data: m.Data,
	}
	if err := ev.Unmarshal(msg); err != nil {
		return true, fmt.Errorf("conntrack dump decode: %w", err)
	}
	if ev.Flow != nil && (f.match == nil || f.match(ev.Flow)) {
		*out = append(*out, conntrack.Flow{TupleOrig: ev.Flow.TupleOrig, TupleReply: ev.Flow.TupleReply, Zone: ev.Flow.Zone})
	}
	return false, nil
}

// deleteFlows deletes flows through conn; entries that expired meanwhile
// are not errors. It returns how many it deleted.
func deleteFlows(conn *conntrack.Conn, flows []conntrack.Flow) (int, error) {
	var errs []error
	n := 0
	for i := range flows {
		if err := conn.Delete(flows[i]); err != nil {
			if errors.Is(err, unix.ENOENT) {
				continue // expired meanwhile
			}
			errs = append(errs, fmt.Errorf("conntrack delete %s: %w", flows[i].TupleOrig, err))
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}

// Attribute types of a conntrack entry (linux/netfilter/nfnetlink_conntrack.h).
const (
	ctaTupleOrig  = 1
	ctaTupleReply = 2
	ctaTupleIP    = 1
	ctaIPv4Src    = 1
	ctaIPv4Dst    = 2
	ctaIPv6Src    = 3
	ctaIPv6Dst    = 4
	nlaTypeMask   = 0x3fff // without NLA_F_NESTED and NLA_F_NET_BYTEORDER
	nfgenmsgLen   = 4
)

// anyTupleAddr says whether fn accepts one of the addresses of the
// original and reply tuples of the entry in data (a netfilter message's
// payload), read without decoding the rest. An entry it cannot read is
// accepted, so that the full decoder judges it.
func anyTupleAddr(data []byte, fn func(netip.Addr) bool) bool {
	if len(data) < nfgenmsgLen {
		return true
	}
	found, ok := false, true
	walkAttrs(data[nfgenmsgLen:], &ok, func(t uint16, tuple []byte) {
		if t != ctaTupleOrig && t != ctaTupleReply {
			return
		}
		walkAttrs(tuple, &ok, func(t uint16, ip []byte) {
			if t != ctaTupleIP {
				return
			}
			walkAttrs(ip, &ok, func(t uint16, v []byte) {
				a, valid := tupleAddr(t, v)
				if valid && fn(a) {
					found = true
				}
			})
		})
	})
	return found || !ok
}

// tupleAddr is the address of a CTA_IP_* attribute.
func tupleAddr(t uint16, v []byte) (netip.Addr, bool) {
	switch {
	case (t == ctaIPv4Src || t == ctaIPv4Dst) && len(v) == 4:
		return netip.AddrFrom4([4]byte(v)), true
	case (t == ctaIPv6Src || t == ctaIPv6Dst) && len(v) == 16:
		return netip.AddrFrom16([16]byte(v)), true
	}
	return netip.Addr{}, false
}

// walkAttrs calls fn with the type and payload of each netlink attribute
// in b; it clears *ok if b is not a well-formed attribute list.
func walkAttrs(b []byte, ok *bool, fn func(t uint16, v []byte)) {
	for len(b) > 0 {
		if len(b) < unix.NLA_HDRLEN {
			*ok = false
			return
		}
		l := int(binary.NativeEndian.Uint16(b[0:2]))
		if l < unix.NLA_HDRLEN || l > len(b) {
			*ok = false
			return
		}
		fn(binary.NativeEndian.Uint16(b[2:4])&nlaTypeMask, b[unix.NLA_HDRLEN:l])
		next := (l + unix.NLA_ALIGNTO - 1) &^ (unix.NLA_ALIGNTO - 1)
		if next >= len(b) {
			return
		}
		b = b[next:]
	}
}
