package labrun

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// proc is a component process the lab started (`ip netns exec` execs the
// binary, so the pid is the component's).
type proc struct {
	cmd       *exec.Cmd
	done      chan struct{} // closed once exit is set and recorded
	logOffset int64         // size of the log file when it started

	mu        sync.Mutex
	requested string // what the lab did to end it ("stop", "kill"), see end
	exit      topo.Exit
}

// end notes that the lab ends the process on purpose (how: "stop", "kill")
// before it signals it: its exit is then not a crash. The first reason
// stays (a stop whose grace ran out kills).
func (p *proc) end(how string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.requested == "" {
		p.requested = how
	}
}

// wait waits for the process, then records how it ended in the run's
// record before it closes done.
func (p *proc) wait(l *Lab, component string) {
	_ = p.cmd.Wait()
	p.mu.Lock()
	p.exit = topo.ExitOf(p.cmd.ProcessState, p.requested)
	e := p.exit
	p.mu.Unlock()
	if err := l.run.RecordExit(p.cmd.Process.Pid, e); err != nil {
		l.log.Warn("record the exit of a component", "component", component, "error", err)
	}
	if e.Requested == "" {
		l.log.Warn("component ended by itself", "component", component, "pid", p.cmd.Process.Pid, "status", e.Status())
	}
	close(p.done)
}

// exited is how the process ended; ok is false while it runs.
func (p *proc) exited() (e topo.Exit, ok bool) {
	if p.running() {
		return topo.Exit{}, false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, true
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

var errNotOwner = errors.New("this lab was opened from another process: only the process that ran Up controls its components")

// startComponent starts argv as component inside the namespace of role (the
// host's when empty), logging to Logs(component).
func (l *Lab) startComponent(component, role string, argv, env []string) error {
	if !l.owner {
		return errNotOwner
	}
	l.mu.Lock()
	old := l.procs[component]
	l.mu.Unlock()
	if old != nil && old.running() {
		return fmt.Errorf("%s is already running (pid %d)", component, old.cmd.Process.Pid)
	}
	var offset int64
	if fi, err := os.Stat(l.Logs(component)); err == nil {
		offset = fi.Size()
	}
	netnsName := ""
	if role != "" {
		netnsName = l.NetNS(role)
	}
	cmd, err := l.run.StartProcess(netnsName, component, argv, append(l.podEnv(component), env...))
	if err != nil {
		return err
	}
	p := &proc{cmd: cmd, done: make(chan struct{}), logOffset: offset}
	go p.wait(l, component)
	l.mu.Lock()
	l.procs[component] = p
	l.mu.Unlock()
	l.log.Info("component started", "component", component, "pid", cmd.Process.Pid, "netns", netnsName)
	return nil
}

func (l *Lab) proc(component string) *proc {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.procs[component]
}

// Running reports whether the lab's process of component runs.
func (l *Lab) Running(component string) bool {
	p := l.proc(component)
	return p != nil && p.running()
}

// PID is the pid of the component's process (0 if it does not run).
func (l *Lab) PID(component string) int {
	if p := l.proc(component); p != nil && p.running() {
		return p.cmd.Process.Pid
	}
	return 0
}

// kill sends SIGKILL to component and waits for it to exit.
func (l *Lab) kill(component string) error {
	if !l.owner {
		return errNotOwner
	}
	p := l.proc(component)
	if p == nil || !p.running() {
		return fmt.Errorf("%s is not running", component)
	}
	p.end("kill")
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("kill %s: %w", component, err)
	}
	<-p.done
	l.log.Info("component killed", "component", component)
	return nil
}

// stop sends SIGTERM to component and waits up to grace, then kills it. It
// reports whether the process exited on its own.
func (l *Lab) stop(component string, grace time.Duration) bool {
	p := l.proc(component)
	if p == nil || !p.running() {
		return true
	}
	p.end("stop")
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(grace):
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		<-p.done
		l.log.Warn("component did not stop in time; killed", "component", component, "grace", grace)
		return false
	}
}

// stopAll stops the components in parallel.
func (l *Lab) stopAll(components []string, grace time.Duration) {
	var wg sync.WaitGroup
	for _, c := range components {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.stop(c, grace)
		}()
	}
	wg.Wait()
}

// waitLog waits until the component, since its last start, has logged a
// JSON line whose "msg" is msg; it fails when the process exits first or
// after timeout.
func (l *Lab) waitLog(component, msg string, timeout time.Duration) error {
	p := l.proc(component)
	if p == nil {
		return fmt.Errorf("%s was not started", component)
	}
	deadline := time.Now().Add(timeout)
	for {
		found, err := logHas(l.Logs(component), p.logOffset, msg)
		if err != nil {
			return err
		}
		if found {
			return nil
		}
		if e, ended := p.exited(); ended {
			return fmt.Errorf("%s ended (%s) before logging %q; see %s", component, e.Status(), msg, l.Logs(component))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not log %q within %s; see %s", component, msg, timeout, l.Logs(component))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func logHas(path string, offset int64, msg string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		return false, fmt.Errorf("open log: %w", err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return false, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		var line struct {
			Msg string `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Msg == msg {
			return true, nil
		}
	}
	return false, nil
}
