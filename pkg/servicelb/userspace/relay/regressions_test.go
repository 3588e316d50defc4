package relay

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
)

// countingEntry counts the events the loop hands an entry.
type countingEntry struct {
	entry
	n *int
}

func (c countingEntry) handle(l *Loop, events uint32) {
	*c.n++
	c.entry.handle(l, events)
}

// TestHangUpWhileBytesWaitDoesNotSpin: the client sends its request and
// half-closes, the endpoint answers with more than the client takes at once
// and closes. The endpoint's socket then has its FIN and is shut for
// writing while its bytes wait for the client: level-triggered epoll
// reports its hang-up on every wait. The loop must idle until the client
// reads, and the client then gets every byte and the FIN.
//
// It runs in a namespace of its own, whose TCP buffers make the state
// certain: small send buffers (the answer cannot all leave the relay
// towards the client) and large receive buffers (the whole answer and the
// FIN reach the relay's socket to the endpoint).
func TestHangUpWhileBytesWaitDoesNotSpin(t *testing.T) {
	ns := testutil.NewNetNS(t, "relayhup")
	ns.MustExec(t, "sysctl", "-q", "-w", "net.ipv4.tcp_rmem=4096 4194304 33554432", "net.ipv4.tcp_wmem=4096 4096 4096")
	payload := bytes.Repeat([]byte("0123456789abcdef"), 16<<10) // 256 KiB
	var el net.Listener
	require.NoError(t, ns.Do(func() (err error) { el, err = net.Listen("tcp", "127.0.0.1:0"); return err }))
	defer el.Close()
	answered := make(chan error, 1)
	go func() {
		c, err := el.Accept()
		if err != nil {
			answered <- err
			return
		}
		defer c.Close()
		if _, err = io.Copy(io.Discard, c); err == nil {
			_, err = c.Write(payload)
		}
		answered <- err
	}()

	l := startLoop(t, Config{NetNS: ns.Handle})
	var ln *Listener
	require.NoError(t, ns.Do(func() (err error) { ln, err = l.Listen(loopback4, 0); return err }))
	served := serveInBackground(ln, Service{Pick: (&picker{eps: []netip.AddrPort{el.Addr().(*net.TCPAddr).AddrPort()}}).pick, Record: (&events{}).record})
	t.Cleanup(func() {
		require.NoError(t, ln.Close())
		require.NoError(t, <-served)
	})

	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096) })
		if err != nil {
			return err
		}
		return serr
	}}
	var conn net.Conn
	require.NoError(t, ns.Do(func() (err error) { conn, err = d.Dial("tcp", ln.Addr().String()); return err }))
	c := conn.(*net.TCPConn)
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(connDeadline)))
	_, err := c.Write([]byte("request"))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	require.NoError(t, <-answered)

	// Wait until the relay's socket to the endpoint has the endpoint's FIN
	// (it is closed both ways) while answer bytes wait for the client, then
	// count the events the loop hands the pair's sockets.
	handled := 0
	require.Eventually(t, func() bool {
		ready := false
		require.NoError(t, l.doWait(func() {
			for p := range l.pairs {
				info, err := unix.GetsockoptTCPInfo(p.es.fd, unix.IPPROTO_TCP, unix.TCP_INFO)
				if err != nil || info.State != unix.BPF_TCP_CLOSE || p.down.pending == 0 || !p.up.done {
					return
				}
				for id, e := range l.entries {
					if _, ok := e.(*side); ok {
						l.entries[id] = countingEntry{e, &handled}
					}
				}
				ready = true
			}
		}))
		return ready
	}, time.Minute, time.Millisecond, "the endpoint's FIN reached the relay while answer bytes wait")
	time.Sleep(100 * time.Millisecond)
	var n int
	require.NoError(t, l.doWait(func() { n = handled }))
	require.Less(t, n, 10, "events handled while nothing could move (the loop spins on a hang-up)")

	got, err := io.ReadAll(c)
	require.NoError(t, err)
	require.Equal(t, len(payload), len(got))
	require.True(t, bytes.Equal(payload, got), "the client gets the whole answer, then the FIN")
}

// TestResetAfterHalfCloseIsPassedOn: a client that half-closed waits for
// nothing but the answer; when it resets instead, the endpoint is reset:
// its socket, in CLOSE_WAIT after the relayed FIN, is closed by the reset
// alone.
func TestResetAfterHalfCloseIsPassedOn(t *testing.T) {
	el, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer el.Close()
	accepted, gotEOF := make(chan net.Conn, 1), make(chan error, 1)
	go func() {
		c, err := el.Accept()
		if err != nil {
			gotEOF <- err
			return
		}
		accepted <- c
		_, err = io.Copy(io.Discard, c)
		gotEOF <- err
	}()
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{el.Addr().(*net.TCPAddr).AddrPort()}}).pick, Record: (&events{}).record})

	c := dial(t, ln)
	_, err = c.Write([]byte("request"))
	require.NoError(t, err)
	require.NoError(t, c.CloseWrite())
	require.NoError(t, <-gotEOF)
	ec := (<-accepted).(*net.TCPConn)
	defer ec.Close()
	state := func() uint8 {
		rc, err := ec.SyscallConn()
		require.NoError(t, err)
		var info *unix.TCPInfo
		require.NoError(t, rc.Control(func(fd uintptr) { info, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }))
		require.NoError(t, err)
		return info.State
	}
	require.Equal(t, uint8(unix.BPF_TCP_CLOSE_WAIT), state(), "the endpoint has the client's FIN")
	require.NoError(t, c.SetLinger(0))
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return state() == unix.BPF_TCP_CLOSE }, time.Minute, time.Millisecond,
		"the endpoint is reset too")
}

// TestCommandsRacingCloseWakeNoClosedDescriptor hands the loop commands
// from several goroutines while it closes. None may wake the loop through
// its eventfd once the loop closed that: the write fails, or lands in
// whatever file got the descriptor number since.
func TestCommandsRacingCloseWakeNoClosedDescriptor(t *testing.T) {
	// More threads than processors: the kernel preempts them anywhere,
	// also between a command's queueing and its wake.
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(64))
	log := &testutil.JSONLog{}
	for range 2000 {
		l, err := Start(Config{Log: slog.New(slog.NewJSONHandler(log, nil))})
		require.NoError(t, err)
		ln, err := l.Listen(loopback4, 0)
		require.NoError(t, err)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					ln.CloseConnections()
					select {
					case <-l.done:
						return
					default:
					}
				}
			}()
		}
		require.NoError(t, l.Close())
		wg.Wait()
		require.NoError(t, ln.Close())
	}
	require.Zero(t, log.Count("relay loop: wake"), "wakes through a closed eventfd:\n%s", log.String())
}
