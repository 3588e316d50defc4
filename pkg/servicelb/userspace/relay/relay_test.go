package relay

import (
	"bufio"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netns"
	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/servicelb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var loopback4 = netip.MustParseAddr("127.0.0.1")

// events records what a listener reports.
type events struct {
	mu   sync.Mutex
	list []servicelb.EventReason
	eps  []netip.AddrPort
	errs []error
}

func (e *events) record(reason servicelb.EventReason, _, endpoint netip.AddrPort, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.list = append(e.list, reason)
	e.eps = append(e.eps, endpoint)
	e.errs = append(e.errs, err)
}

func (e *events) reasons() []servicelb.EventReason {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]servicelb.EventReason(nil), e.list...)
}

// picker hands out endpoints in order, the last one for ever, and records
// the reset flags it was asked with.
type picker struct {
	mu     sync.Mutex
	eps    []netip.AddrPort
	resets []bool
}

func (p *picker) pick(_ netip.AddrPort, reset bool) (netip.AddrPort, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.resets = append(p.resets, reset)
	if len(p.eps) == 0 {
		return netip.AddrPort{}, servicelb.ErrMissingEndpoints
	}
	ep := p.eps[0]
	if len(p.eps) > 1 {
		p.eps = p.eps[1:]
	}
	return ep, nil
}

// startLoop starts a loop that stops with t.
func startLoop(t *testing.T, cfg Config) *Loop {
	t.Helper()
	l, err := Start(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, l.Close()) })
	return l
}

// serveInBackground serves ln for svc in a goroutine; Serve's result
// comes on the channel.
func serveInBackground(ln *Listener, svc Service) <-chan error {
	served := make(chan error, 1)
	go func() { served <- ln.Serve(svc) }()
	return served
}

// serve opens a listener on l for svc and serves it until t ends.
func serve(t *testing.T, l *Loop, ip netip.Addr, svc Service) *Listener {
	t.Helper()
	ln, err := l.Listen(ip, 0)
	require.NoError(t, err)
	served := serveInBackground(ln, svc)
	t.Cleanup(func() {
		require.NoError(t, ln.Close())
		require.NoError(t, <-served)
	})
	return ln
}

// echo is an endpoint that greets each connection with "hello <n>\n",
// echoes what it reads, and half-closes after the client's EOF.
type echo struct {
	l     net.Listener
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	errs  chan error // each connection's end: nil, or its read error
}

func startEcho(t *testing.T, addr string) *echo {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	require.NoError(t, err)
	e := &echo{l: l, errs: make(chan error, 100)}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		for n := 0; ; n++ {
			c, err := l.Accept()
			if err != nil {
				return
			}
			e.mu.Lock()
			e.conns = append(e.conns, c)
			e.mu.Unlock()
			e.wg.Add(1)
			go func() {
				defer e.wg.Done()
				defer c.Close()
				_, err := io.WriteString(c, "hello\n")
				if err == nil {
					// Plain reads and writes: io.Copy between TCP
					// connections would splice through Go's own pipe
					// pool, whose descriptors outlive the test and
					// blur the descriptor counts.
					_, err = io.Copy(struct{ io.Writer }{c}, struct{ io.Reader }{c})
				}
				if err == nil {
					err = c.(*net.TCPConn).CloseWrite()
				}
				select {
				case e.errs <- err:
				default: // nobody asks (the test makes many connections)
				}
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		e.mu.Lock()
		for _, c := range e.conns {
			_ = c.Close()
		}
		e.mu.Unlock()
		e.wg.Wait()
	})
	return e
}

func (e *echo) addr() netip.AddrPort { return e.l.Addr().(*net.TCPAddr).AddrPort() }

// connDeadline bounds a test connection's reads and writes: it only
// guards against a hang, far above what the slowest test needs on an idle
// machine (8 MiB each way under -race took 15 s with both cores busy).
const connDeadline = time.Minute

func dial(t *testing.T, ln *Listener) *net.TCPConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.SetDeadline(time.Now().Add(connDeadline)))
	return c.(*net.TCPConn)
}

func readGreeting(t *testing.T, r *bufio.Reader) {
	t.Helper()
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "hello\n", line)
}

// openFDs counts the process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	require.NoError(t, err)
	return len(ents)
}

func TestRelaysBothWaysWithHalfClose(t *testing.T) {
	for _, family := range []string{"127.0.0.1", "::1"} {
		t.Run(family, func(t *testing.T) {
			ep := startEcho(t, net.JoinHostPort(family, "0"))
			ev := &events{}
			l := startLoop(t, Config{})
			ln := serve(t, l, netip.MustParseAddr(family), Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: ev.record})

			c := dial(t, ln)
			r := bufio.NewReader(c)
			readGreeting(t, r)
			// 8 MiB both ways: more than any socket buffer and pipe, so the
			// relay has to wait for the slow side (the reader starts late).
			payload := make([]byte, 8<<20)
			for i := range payload {
				payload[i] = byte(rand.Uint32())
			}
			written := make(chan error, 1)
			go func() {
				_, err := c.Write(payload)
				if err == nil {
					err = c.CloseWrite() // the endpoint sees EOF, answers the rest, then closes
				}
				written <- err
			}()
			time.Sleep(100 * time.Millisecond)
			got, err := io.ReadAll(r)
			require.NoError(t, err, "the client reads the whole echo, then the endpoint's FIN")
			require.NoError(t, <-written)
			require.Equal(t, sha256.Sum256(payload), sha256.Sum256(got))
			require.NoError(t, <-ep.errs, "the endpoint saw a clean EOF")
			require.Equal(t, []servicelb.EventReason{servicelb.EventEndpointChosen}, ev.reasons())
			require.Equal(t, family == "::1", ln.Addr().Addr().Is6())
		})
	}
}

func TestManyConnectionsAtOnce(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(connDeadline))
			msg := []byte{byte(i), byte(i >> 8), '\n'}
			if _, err := c.Write(msg); err != nil {
				errs <- err
				return
			}
			_ = c.(*net.TCPConn).CloseWrite()
			got, err := io.ReadAll(c)
			if err == nil && string(got) != "hello\n"+string(msg) {
				err = errors.New("wrong answer " + string(got))
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
}

func TestResetIsPassedOn(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})

	t.Run("client resets", func(t *testing.T) {
		c := dial(t, ln)
		readGreeting(t, bufio.NewReader(c))
		require.NoError(t, c.SetLinger(0))
		require.NoError(t, c.Close())
		err := <-ep.errs
		require.ErrorIs(t, err, syscall.ECONNRESET, "the endpoint is reset too")
	})
	t.Run("endpoint resets", func(t *testing.T) {
		c := dial(t, ln)
		r := bufio.NewReader(c)
		readGreeting(t, r)
		ep.mu.Lock()
		last := ep.conns[len(ep.conns)-1].(*net.TCPConn)
		ep.mu.Unlock()
		require.NoError(t, last.SetLinger(0))
		require.NoError(t, last.Close())
		_, err := r.ReadByte()
		require.ErrorIs(t, err, syscall.ECONNRESET, "the client is reset too")
		<-ep.errs
	})
}

func TestFailedDialMovesToTheNextEndpoint(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	refused := closedPort(t)
	ev := &events{}
	pk := &picker{eps: []netip.AddrPort{refused, refused, ep.addr()}}
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: pk.pick, Record: ev.record})

	readGreeting(t, bufio.NewReader(dial(t, ln)))
	require.Equal(t, []servicelb.EventReason{servicelb.EventDialFailed, servicelb.EventDialFailed, servicelb.EventEndpointChosen}, ev.reasons())
	require.Equal(t, []netip.AddrPort{refused, refused, ep.addr()}, ev.eps)
	require.Equal(t, []bool{false, true, true}, pk.resets, "a sticky client is moved on after a failure")
}

// closedPort is a loopback address where nothing listens.
func closedPort(t *testing.T) netip.AddrPort {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	a := l.Addr().(*net.TCPAddr).AddrPort()
	require.NoError(t, l.Close())
	return a
}

func TestGivesUpAfterEveryAttempt(t *testing.T) {
	refused := closedPort(t)
	ev := &events{}
	l := startLoop(t, Config{DialTimeouts: []time.Duration{time.Second, time.Second, time.Second}})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{refused}}).pick, Record: ev.record})
	before := openFDs(t)

	c := dial(t, ln)
	_, err := c.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the client is closed once every attempt failed")
	require.Equal(t, []servicelb.EventReason{servicelb.EventDialFailed, servicelb.EventDialFailed, servicelb.EventDialFailed}, ev.reasons())
	require.NoError(t, c.Close())
	require.Eventually(t, func() bool { return openFDs(t) == before }, time.Minute, 10*time.Millisecond,
		"no socket or pipe is left")
}

func TestNoEndpointsClosesTheClient(t *testing.T) {
	ev := &events{}
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{}).pick, Record: ev.record})
	_, err := dial(t, ln).Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF)
	require.Equal(t, []servicelb.EventReason{servicelb.EventNoEndpoints}, ev.reasons())
}

func TestListenerCloseKeepsConnectionsInFlight(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	ln, err := l.Listen(loopback4, 0)
	require.NoError(t, err)
	served := serveInBackground(ln, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})

	c := dial(t, ln)
	r := bufio.NewReader(c)
	readGreeting(t, r)
	require.NoError(t, ln.Close())
	require.NoError(t, <-served, "Serve returns once the listener is closed")
	_, err = net.DialTimeout("tcp", ln.Addr().String(), time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "no new connection")

	_, err = c.Write([]byte("still here\n"))
	require.NoError(t, err)
	line, err := r.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "still here\n", line, "the connection in flight goes on")
}

func TestCloseConnectionsAbortsOnlyThatListener(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	svc := func() Service {
		return Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record}
	}
	a, b := serve(t, l, loopback4, svc()), serve(t, l, loopback4, svc())
	ca, cb := dial(t, a), dial(t, b)
	ra, rb := bufio.NewReader(ca), bufio.NewReader(cb)
	readGreeting(t, ra)
	readGreeting(t, rb)

	a.CloseConnections()
	_, err := ra.ReadByte()
	require.ErrorIs(t, err, syscall.ECONNRESET)
	_, err = cb.Write([]byte("b\n"))
	require.NoError(t, err)
	line, err := rb.ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "b\n", line)
}

func TestCloseLeavesNothingBehind(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	before := openFDs(t)
	l, err := Start(Config{})
	require.NoError(t, err)
	ln, err := l.Listen(loopback4, 0)
	require.NoError(t, err)
	unserved, err := l.Listen(loopback4, 0)
	require.NoError(t, err)
	served := serveInBackground(ln, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})
	c := dial(t, ln)
	r := bufio.NewReader(c)
	readGreeting(t, r)
	// Bytes stuck in a pipe: the client does not read the echo of 4 MiB.
	go func() { _, _ = c.Write(make([]byte, 4<<20)) }()
	time.Sleep(100 * time.Millisecond)

	require.NoError(t, l.Close())
	require.NoError(t, <-served, "Serve returns when the loop closes")
	_, err = io.Copy(io.Discard, r)
	require.ErrorIs(t, err, syscall.ECONNRESET, "the relayed connection is reset")
	require.NoError(t, c.Close())
	require.ErrorIs(t, ln.Serve(Service{}), ErrClosed)
	require.NoError(t, ln.Close(), "closing again after the loop is harmless")
	_, err = net.DialTimeout("tcp", unserved.Addr().String(), time.Second)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "a listener never served is closed with the loop")
	_, err = l.Listen(loopback4, 0)
	require.ErrorIs(t, err, ErrClosed)
	require.NoError(t, l.Close())
	require.Eventually(t, func() bool { return openFDs(t) <= before }, time.Minute, 10*time.Millisecond,
		"every socket, pipe, epoll and eventfd is closed")
}

func TestEndpointSocketGetsKeepAliveOnceThePairLasts(t *testing.T) {
	saved := keepAliveDelay
	keepAliveDelay = 50 * time.Millisecond
	t.Cleanup(func() { keepAliveDelay = saved })
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})
	readGreeting(t, bufio.NewReader(dial(t, ln)))

	endpointKeepAlive := func() (on, idle int) {
		require.NoError(t, l.doWait(func() {
			for p := range l.pairs {
				on, _ = unix.GetsockoptInt(p.es.fd, unix.SOL_SOCKET, unix.SO_KEEPALIVE)
				idle, _ = unix.GetsockoptInt(p.es.fd, unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
			}
		}))
		return on, idle
	}
	on, _ := endpointKeepAlive()
	require.Zero(t, on, "a new pair's endpoint socket has no keepalive yet")
	require.Eventually(t, func() bool {
		on, idle := endpointKeepAlive()
		return on == 1 && idle == KeepAliveIdleSeconds
	}, time.Minute, 10*time.Millisecond)
}

// TestFinishedPairsLeaveNoTimers relays short connections one after the
// other: once they ended, no timer of theirs waits in the loop (a relayed
// pair's keepalive timer, due keepAliveDelay later, would keep every pair
// of the last seconds in memory).
func TestFinishedPairsLeaveNoTimers(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: (&events{}).record})
	for range 50 {
		c := dial(t, ln)
		readGreeting(t, bufio.NewReader(c))
		require.NoError(t, c.Close())
	}
	require.Eventually(t, func() bool { return ln.Connections() == 0 }, time.Minute, 10*time.Millisecond)
	var pending int
	require.NoError(t, l.doWait(func() { pending = len(l.timers) }))
	require.Zero(t, pending, "timers left behind by finished pairs")
}

// TestDialTimeoutMovesOn runs the loop in a namespace of its own, where
// SYNs to one port are dropped: that dial times out after its timeout and
// the connection goes to the next endpoint.
func TestDialTimeoutMovesOn(t *testing.T) {
	ns := testutil.NewNetNS(t, "relay")
	ns.MustExec(t, "nft", "add table inet t; add chain inet t out { type filter hook output priority 0; }; add rule inet t out tcp dport 9 drop")
	var ep *echo
	require.NoError(t, ns.Do(func() error { ep = startEcho(t, "127.0.0.1:0"); return nil }))
	blackhole := netip.MustParseAddrPort("127.0.0.1:9")
	ev := &events{}
	l := startLoop(t, Config{NetNS: ns.Handle, DialTimeouts: []time.Duration{200 * time.Millisecond, time.Second}})
	var ln *Listener
	require.NoError(t, ns.Do(func() (err error) { ln, err = l.Listen(loopback4, 0); return err }))
	served := serveInBackground(ln, Service{Pick: (&picker{eps: []netip.AddrPort{blackhole, ep.addr()}}).pick, Record: ev.record})
	t.Cleanup(func() {
		require.NoError(t, ln.Close())
		require.NoError(t, <-served)
	})

	var c net.Conn
	require.NoError(t, ns.Do(func() (err error) { c, err = net.DialTimeout("tcp", ln.Addr().String(), 5*time.Second); return err }))
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(connDeadline)))
	start := time.Now()
	readGreeting(t, bufio.NewReader(c))
	t.Logf("FIGURE: greeting after a timed-out dial in %s (timeout 200ms)", time.Since(start).Round(time.Millisecond))
	require.Equal(t, []servicelb.EventReason{servicelb.EventDialFailed, servicelb.EventEndpointChosen}, ev.reasons())
	require.ErrorIs(t, ev.errs[0], unix.ETIMEDOUT, "the first dial ended by its timeout, not by a refusal")
}

// TestAcceptErrorLeavesThePortServing runs out of descriptors while a
// client waits: the failed accept is reported, and once descriptors are
// back the same client is served.
func TestAcceptErrorLeavesThePortServing(t *testing.T) {
	ep := startEcho(t, "127.0.0.1:0")
	ev := &events{}
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{ep.addr()}}).pick, Record: ev.record})

	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	require.NoError(t, err)
	var saved unix.Rlimit
	require.NoError(t, unix.Getrlimit(unix.RLIMIT_NOFILE, &saved))
	restore := sync.OnceFunc(func() { require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &saved)) })
	defer restore()
	lowest, err := unix.Dup(fd) // the lowest free descriptor number
	require.NoError(t, err)
	require.NoError(t, unix.Close(lowest))
	low := saved
	low.Cur = uint64(lowest) // no new descriptor at all
	require.NoError(t, unix.Setrlimit(unix.RLIMIT_NOFILE, &low))
	require.NoError(t, unix.Connect(fd, &unix.SockaddrInet4{Port: int(ln.Addr().Port()), Addr: loopback4.As4()}))
	require.Eventually(t, func() bool {
		r := ev.reasons()
		return len(r) > 0 && r[0] == servicelb.EventReadError
	}, time.Minute, time.Millisecond, "the failed accept is reported")
	restore()

	f := os.NewFile(uintptr(fd), "client")
	c, err := net.FileConn(f)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	defer c.Close()
	require.NoError(t, c.SetDeadline(time.Now().Add(connDeadline)))
	readGreeting(t, bufio.NewReader(c))
	require.Contains(t, ev.reasons(), servicelb.EventEndpointChosen)
}

// TestAnswerBeforeResetArrives: an endpoint that answers and closes with
// the request unread resets the connection; its answer still reaches the
// client before the reset, as on a direct connection.
func TestAnswerBeforeResetArrives(t *testing.T) {
	l4, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var wg sync.WaitGroup
	t.Cleanup(func() {
		_ = l4.Close()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l4.Accept()
			if err != nil {
				return
			}
			// Wait for the request, answer without reading it, close: the
			// unread bytes make the kernel send a reset after the answer.
			buf := make([]byte, 1)
			_, _ = c.Read(buf)
			_, _ = io.WriteString(c, "400 no\n")
			_ = c.Close()
		}
	}()
	l := startLoop(t, Config{})
	ln := serve(t, l, loopback4, Service{Pick: (&picker{eps: []netip.AddrPort{l4.Addr().(*net.TCPAddr).AddrPort()}}).pick,
		Record: (&events{}).record})
	for i := range 20 {
		c := dial(t, ln)
		_, err := c.Write([]byte("a request longer than one byte\n"))
		require.NoError(t, err)
		line, err := bufio.NewReader(c).ReadString('\n')
		require.NoError(t, err, "try %d: the answer comes before the reset", i)
		require.Equal(t, "400 no\n", line)
		require.NoError(t, c.Close())
	}
}

// TestStartOutsideANamespaceFails: a namespace handle that is none (here
// /dev/null) is refused at Start, and nothing of the loop is left.
func TestStartOutsideANamespaceFails(t *testing.T) {
	f, err := os.Open(os.DevNull)
	require.NoError(t, err)
	defer f.Close()
	before := openFDs(t)
	_, err = Start(Config{NetNS: netns.NsHandle(f.Fd())})
	require.ErrorContains(t, err, "enter namespace")
	require.Equal(t, before, openFDs(t), "no epoll set or eventfd left")
}
