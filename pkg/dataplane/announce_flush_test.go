package dataplane

import (
	"encoding/binary"
	"maps"
	"net"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
)

// seqReceiver records, per sequence number, how long a datagram took from
// its send (stamped in it) to its receipt.
type seqReceiver struct {
	mu    sync.Mutex
	delay map[uint32]time.Duration
	done  chan struct{}
}

func (r *seqReceiver) received() map[uint32]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	return maps.Clone(r.delay)
}

func listenSeq(t *testing.T, ns *testutil.NetNS, network string, port int, r *seqReceiver) {
	t.Helper()
	conn := listenUDP(t, ns, network, port)
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64)
		for {
			n, err := conn.Read(buf)
			if err != nil {
				return
			}
			now := time.Now()
			if n < 12 {
				continue
			}
			seq := binary.BigEndian.Uint32(buf[0:4])
			sent := time.Unix(0, int64(binary.BigEndian.Uint64(buf[4:12])))
			r.mu.Lock()
			r.delay[seq] = now.Sub(sent)
			r.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = conn.Close()
		<-done
	})
}

// The flush that comes with every announcement round makes the proxy
// resolve its LB nexthops again: the egress traffic it routes to them waits
// for the ARP / ND exchange, and nothing is lost.
func TestAnnouncementFlushAndEgress(t *testing.T) {
	tp := newTopology(t)
	dp := newDP(t, tp.P, Options{AnnounceCount: -1})
	require.NoError(t, dp.Apply(tp.state()))
	tp.T1.MustExec(t, "ping", "-c", "1", "-W", "2", bridge4)
	tp.T1.MustExec(t, "ping", "-6", "-c", "1", "-W", "2", bridge6)

	const (
		gap    = 200 * time.Microsecond // between datagrams
		rounds = 5
		every  = 150 * time.Millisecond // between announcement rounds
	)
	for i, f := range []struct {
		name, network string
		src, dst      netip.Addr
	}{
		{"ipv4", "udp4", vip4, ext4},
		{"ipv6", "udp6", vip6, ext6},
	} {
		port := 5100 + i
		r := &seqReceiver{delay: map[uint32]time.Duration{}}
		listenSeq(t, tp.LB1, f.network, port, r)
		listenSeq(t, tp.LB2, f.network, port, r)
		var conn *net.UDPConn
		require.NoError(t, tp.T1.Do(func() error {
			var err error
			conn, err = net.DialUDP(f.network, net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.src, 0)),
				net.UDPAddrFromAddrPort(netip.AddrPortFrom(f.dst, uint16(port))))
			return err
		}))
		send := func(seq uint32) {
			var b [12]byte
			binary.BigEndian.PutUint32(b[0:4], seq)
			binary.BigEndian.PutUint64(b[4:12], uint64(time.Now().UnixNano()))
			_, err := conn.Write(b[:])
			require.NoError(t, err)
		}
		// Warm up: the nexthop's entry is resolved before the stream.
		send(0)
		eventually(t, func() bool { return len(r.received()) == 1 }, "%s: the first datagram arrives", f.name)

		var flushes []time.Time
		var sentAt []time.Time // by sequence number - 1
		start := time.Now()
		next := start.Add(every / 2)
		for seq := uint32(1); len(flushes) < rounds || time.Since(flushes[len(flushes)-1]) < every/2; seq++ {
			if now := time.Now(); now.After(next) && len(flushes) < rounds {
				announced, _ := dp.announceRound()
				require.True(t, announced)
				flushes = append(flushes, now)
				next = now.Add(every)
			}
			sentAt = append(sentAt, time.Now())
			send(seq)
			time.Sleep(gap)
		}
		_ = conn.Close()
		total := len(sentAt)
		// Wait for the stream to drain; what is still missing then is lost.
		var got map[uint32]time.Duration
		settled := 0
		require.Eventually(t, func() bool {
			n := len(got)
			got = r.received()
			if len(got) == total+1 {
				return true
			}
			if len(got) == n {
				settled++
			} else {
				settled = 0
			}
			return settled >= 20 // 100 ms without a new datagram
		}, time.Minute, 5*time.Millisecond)

		// The datagrams that met a flushed entry (sent within 5 ms of a
		// flush, the first of them waiting for the resolution) all
		// arrive. A datagram lost away from any flush is the shared
		// machine's (its per-CPU backlog is every test's), counted apart.
		var base, first []time.Duration
		lostElsewhere := 0
		fi := 0
		for i, at := range sentAt {
			d, ok := got[uint32(i+1)]
			after := sinceFlush(flushes, at)
			nearFlush := after >= 0 && after < 5*time.Millisecond
			switch {
			case !ok && nearFlush:
				t.Errorf("%s: datagram %d, sent %v after a flush, lost", f.name, i+1, after)
			case !ok:
				lostElsewhere++
			case fi < len(flushes) && at.After(flushes[fi]):
				first = append(first, d)
				fi++
			default:
				base = append(base, d)
			}
		}
		require.False(t, t.Failed())
		require.Len(t, first, len(flushes), "%s: the first datagram after every flush arrived", f.name)
		slices.Sort(base)
		t.Logf("FIGURE: %s egress to an LB nexthop across %d announcement flushes: %d datagrams, none lost near a flush (%d lost elsewhere); the first after a flush took %v (median otherwise %v, p99 %v)",
			f.name, len(flushes), total, lostElsewhere, roundAll(first), base[len(base)/2].Round(time.Microsecond), base[len(base)*99/100].Round(time.Microsecond))
	}
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Microsecond)
	}
	return out
}

// sinceFlush is how long after the last flush before it at was (-1 if none
// came before).
func sinceFlush(flushes []time.Time, at time.Time) time.Duration {
	d := time.Duration(-1)
	for _, f := range flushes {
		if !f.After(at) {
			d = at.Sub(f)
		}
	}
	return d
}
