// Package relay is the userspace provider's TCP engine: one epoll loop, on
// one OS thread inside the provider's network namespace, accepts on the
// listening sockets handed to it, dials an endpoint for each connection
// (the next endpoint after a failed dial, with growing timeouts) and
// splices both ways through pooled kernel pipes, passing a half-close on
// as a half-close and an error as a reset. The bytes never enter user
// space, and a connection costs no goroutine: per-connection goroutines
// cost the Go scheduler more than the relaying itself
// (docs/servicelb.md, "Connection rate of the userspace provider").
package relay

import (
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/causeway-net/causeway/internal/limits"
	"github.com/causeway-net/causeway/internal/netnsdo"
)

// Config configures a Loop.
type Config struct {
	// NetNS is the namespace of the loop's thread, where it makes the
	// sockets it dials (netnsdo.Current: the caller's).
	NetNS netns.NsHandle
	// DialTimeouts are the successive dial timeouts of a connection; each
	// failed dial moves it to the next endpoint (default DialTimeouts).
	DialTimeouts []time.Duration
	// Log receives what goes wrong in the loop itself (slog.Default if nil).
	Log *slog.Logger
	// MaxPerClient bounds the connections one client address holds
	// through the loop, all listeners together; a connection past it is
	// reset at once, and the refusal counted in Refusals (logged once per
	// client). Zero: DefaultMaxPerClient.
	MaxPerClient int
	// Refusals counts the refusals (nil: counted and logged on their own).
	Refusals *limits.Refusals
}

// DefaultMaxPerClient is the default of Config.MaxPerClient.
const DefaultMaxPerClient = 512

// DialTimeouts are the default successive dial timeouts.
var DialTimeouts = []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second}

// RetryPause is the pause before dial attempt i (counted from 0).
func RetryPause(i int) time.Duration { return time.Duration(i) * 10 * time.Millisecond }

// ErrClosed is returned for work given to a closed loop.
var ErrClosed = errors.New("relay loop closed")

// Loop is one epoll loop and everything registered with it. Only the loop's
// thread touches the sockets, pairs and pipes; other goroutines reach it
// through do.
type Loop struct {
	cfg  Config
	log  *slog.Logger
	epfd int
	wake int // eventfd: commands are waiting
	done chan struct{}

	mu        sync.Mutex
	commands  []func()
	closed    bool
	listeners map[*Listener]struct{} // open, served or not

	// Owned by the loop's thread.
	nextID  uint64
	entries map[uint64]entry
	pairs   map[*pair]struct{}
	clients map[netip.Addr]int // the pairs of each client address
	pipes   pipePool
	timers  timerHeap
	now     time.Time
	stop    bool
}

// entry is what an epoll event stands for: a listener or a side of a pair.
type entry interface {
	handle(l *Loop, events uint32)
}

// Start makes the loop and starts its thread; Close stops it.
func Start(cfg Config) (*Loop, error) {
	if len(cfg.DialTimeouts) == 0 {
		cfg.DialTimeouts = DialTimeouts
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	if cfg.MaxPerClient <= 0 {
		cfg.MaxPerClient = DefaultMaxPerClient
	}
	if cfg.Refusals == nil {
		cfg.Refusals = limits.New("causeway_proxy_relay", cfg.Log)
	}
	l := &Loop{cfg: cfg, log: cfg.Log, done: make(chan struct{}), nextID: 1, // 0 is the eventfd
		entries: make(map[uint64]entry), pairs: make(map[*pair]struct{}), listeners: make(map[*Listener]struct{}),
		clients: make(map[netip.Addr]int)}
	if err := l.open(); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	if err := l.startThread(); err != nil {
		_ = unix.Close(l.wake)
		_ = unix.Close(l.epfd)
		return nil, fmt.Errorf("relay: enter namespace: %w", err)
	}
	return l, nil
}

// open makes the epoll set and the eventfd that wakes it for commands.
func (l *Loop) open() error {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return fmt.Errorf("epoll: %w", err)
	}
	wake, err := unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK)
	if err != nil {
		_ = unix.Close(epfd)
		return fmt.Errorf("eventfd: %w", err)
	}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, wake, &unix.EpollEvent{Events: unix.EPOLLIN}); err != nil {
		_ = unix.Close(wake)
		_ = unix.Close(epfd)
		return fmt.Errorf("epoll add eventfd: %w", err)
	}
	l.epfd, l.wake = epfd, wake
	return nil
}

// startThread runs the loop on a thread of its own inside the configured
// namespace; it returns once the thread is there, or why it could not get
// there.
func (l *Loop) startThread() error {
	started := make(chan error, 1)
	go func() {
		defer close(l.done)
		// One thread for the loop's life: its blocking waits then cost no
		// hand-over between threads. Never unlocked, the thread ends with
		// the loop.
		runtime.LockOSThread()
		ran := false
		err := netnsdo.Do(l.cfg.NetNS, func() error {
			ran = true
			started <- nil
			l.run()
			return nil
		})
		switch {
		case err != nil && !ran:
			started <- err
		case err != nil:
			l.log.Error("relay loop: leave namespace", "error", err)
		}
	}()
	if err := <-started; err != nil {
		<-l.done
		return err
	}
	return nil
}

// Close aborts every relayed connection and pending dial, closes the
// listeners and stops the loop's thread; it returns once the thread ended.
func (l *Loop) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		<-l.done
		return nil
	}
	l.closed = true
	l.commands = append(l.commands, func() { l.stop = true })
	l.poke()
	l.mu.Unlock()
	<-l.done
	return nil
}

// do runs fn on the loop's thread soon; it reports ErrClosed once the loop
// is closing.
func (l *Loop) do(fn func()) error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	l.commands = append(l.commands, fn)
	l.poke()
	l.mu.Unlock()
	return nil
}

// doWait is do that waits until fn ran. When the loop is closing it waits
// until the loop's thread ended and reports ErrClosed (fn may have run).
func (l *Loop) doWait(fn func()) error {
	ran := make(chan struct{})
	if err := l.do(func() { fn(); close(ran) }); err != nil {
		<-l.done
		return err
	}
	select {
	case <-ran:
		return nil
	case <-l.done:
		return ErrClosed
	}
}

// poke wakes the loop's thread. It is called with mu held and the loop not
// closed: shutdown marks the loop closed under mu before it closes the
// eventfd, whose number may then soon be another file's.
func (l *Loop) poke() {
	one := [8]byte{1}
	if _, err := unix.Write(l.wake, one[:]); err != nil && !errors.Is(err, unix.EAGAIN) {
		l.log.Error("relay loop: wake", "error", err)
	}
}

// run is the loop: wait, dispatch, run commands and timers, until Close.
func (l *Loop) run() {
	defer l.shutdown()
	events := make([]unix.EpollEvent, 128)
	for !l.stop {
		n, err := unix.EpollWait(l.epfd, events, l.timers.waitMillis(time.Now()))
		if err != nil && !errors.Is(err, unix.EINTR) {
			l.log.Error("relay loop: epoll wait", "error", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		l.now = time.Now()
		for _, ev := range events[:max(n, 0)] {
			id := uint64(uint32(ev.Fd)) | uint64(uint32(ev.Pad))<<32
			if id == 0 {
				l.runCommands()
				continue
			}
			if e, ok := l.entries[id]; ok {
				e.handle(l, ev.Events)
			}
		}
		l.timers.fire(l.now)
	}
}

func (l *Loop) runCommands() {
	var buf [8]byte
	_, _ = unix.Read(l.wake, buf[:])
	l.mu.Lock()
	cmds := l.commands
	l.commands = nil
	l.mu.Unlock()
	for _, fn := range cmds {
		fn()
	}
}

// shutdown aborts what is left and closes the loop's own descriptors.
func (l *Loop) shutdown() {
	l.mu.Lock()
	l.closed = true
	cmds := l.commands
	l.commands = nil
	l.mu.Unlock()
	for _, fn := range cmds {
		fn()
	}
	for p := range l.pairs {
		p.abort(l)
	}
	for _, e := range l.entries {
		if ln, ok := e.(*Listener); ok {
			ln.close(l)
		}
	}
	l.mu.Lock()
	unserved := l.listeners
	l.listeners = nil
	l.mu.Unlock()
	for ln := range unserved {
		ln.closeFD()
	}
	l.pipes.closeAll()
	_ = unix.Close(l.wake)
	_ = unix.Close(l.epfd)
}

// register adds fd to the epoll set for events under a new id.
func (l *Loop) register(fd int, events uint32, e entry) (uint64, error) {
	id := l.nextID
	l.nextID++
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return 0, fmt.Errorf("epoll add: %w", err)
	}
	l.entries[id] = e
	return id, nil
}

// modify changes the events of a registered fd.
func (l *Loop) modify(fd int, id uint64, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(uint32(id)), Pad: int32(uint32(id >> 32))}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, fd, &ev); err != nil {
		return fmt.Errorf("epoll modify: %w", err)
	}
	return nil
}

// forget takes fd out of the epoll set (when it stays open) and drops id.
func (l *Loop) forget(fd int, id uint64, inSet bool) {
	if inSet {
		_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, fd, nil)
	}
	delete(l.entries, id)
}
