package labrun

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"strings"
	"time"
)

// DefaultGrace is how long StopComponent waits after SIGTERM before
// SIGKILL, Kubernetes' default termination grace period.
const DefaultGrace = 30 * time.Second

// controlSocket is where the owner of a run takes stop and restart requests
// from other processes (`lab stop`, `lab restart`).
const controlSocket = "control.sock"

// Components are the names StopComponent and StartComponent take: the NSM
// control plane, the configuration server, the IPAM, the proxy, every LB
// and every target.
func (l *Lab) Components() []string {
	st := l.state()
	return append(append([]string{"nsm", "nsp", "ipam", "proxy"}, st.LBs...), st.Targets...)
}

func (l *Lab) known(name string) error {
	if !slices.Contains(l.Components(), name) {
		return fmt.Errorf("unknown component %q (one of %s)", name, strings.Join(l.Components(), ", "))
	}
	return nil
}

// StopComponent ends the component as Kubernetes ends a pod: SIGTERM, then
// SIGKILL if it is still there after grace. The component's namespace and
// kernel state stay (stopping nsm leaves the veth pairs its forwarder made,
// as NSM's manager and forwarder leave their data paths when their pods are
// replaced); a stopped LB is no longer routed to by the external host.
func (l *Lab) StopComponent(name string, grace time.Duration) error {
	if !l.owner {
		return errNotOwner
	}
	if err := l.known(name); err != nil {
		return err
	}
	if !l.Running(name) {
		return fmt.Errorf("%s is not running", name)
	}
	if !l.stop(name, grace) {
		l.log.Warn("component killed after the grace period", "component", name, "grace", grace)
	}
	l.log.Info("component stopped", "component", name)
	if slices.Contains(l.state().LBs, name) {
		return l.syncExtRoutes()
	}
	return nil
}

// StartComponent starts a stopped component again, as its pod would be
// re-created, and waits until it serves (targets connect in the
// background).
func (l *Lab) StartComponent(name string) error {
	if !l.owner {
		return errNotOwner
	}
	if err := l.known(name); err != nil {
		return err
	}
	st := l.state()
	switch {
	case name == "nsm":
		return l.startNSM()
	case name == "nsp":
		return l.startNSP(context.Background())
	case name == "ipam":
		return l.StartIPAM()
	case name == "proxy":
		return l.StartProxy()
	case slices.Contains(st.LBs, name):
		return l.StartLB(name)
	default:
		return l.StartTarget(name)
	}
}

// RestartComponent is StopComponent (if it runs) then StartComponent.
func (l *Lab) RestartComponent(name string, grace time.Duration) error {
	if err := l.known(name); err != nil {
		return err
	}
	if l.Running(name) {
		if err := l.StopComponent(name, grace); err != nil {
			return err
		}
	}
	return l.StartComponent(name)
}

// serveControl takes requests on the run's control socket until stop is
// called: one line "stop|restart <component> [grace]" per connection,
// answered "ok" or "error: ...".
func (l *Lab) serveControl() (stop func(), err error) {
	path := l.run.Path(controlSocket)
	_ = os.Remove(path)
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			l.handleControl(c)
		}
	}()
	return func() {
		_ = lis.Close()
		<-done
		_ = os.Remove(path)
	}, nil
}

func (l *Lab) handleControl(c net.Conn) {
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return
	}
	if err := l.control(strings.Fields(line)); err != nil {
		fmt.Fprintf(c, "error: %v\n", err)
		return
	}
	fmt.Fprintln(c, "ok")
}

func (l *Lab) control(f []string) error {
	if len(f) < 2 || len(f) > 3 {
		return errors.New("request must be: stop|restart <component> [grace]")
	}
	grace := DefaultGrace
	if len(f) == 3 {
		d, err := time.ParseDuration(f[2])
		if err != nil || d < 0 {
			return fmt.Errorf("bad grace %q", f[2])
		}
		grace = d
	}
	switch f[0] {
	case "stop":
		return l.StopComponent(f[1], grace)
	case "restart":
		return l.RestartComponent(f[1], grace)
	case "start":
		return l.StartComponent(f[1])
	default:
		return fmt.Errorf("unknown request %q", f[0])
	}
}

// Control asks the process that owns the run to stop, start or restart a
// component (verb "stop", "start" or "restart") and waits for the answer.
// From the owner itself it acts directly.
func (l *Lab) Control(verb, component string, grace time.Duration) error {
	if l.owner {
		return l.control([]string{verb, component, grace.String()})
	}
	c, err := net.Dial("unix", l.run.Path(controlSocket))
	if err != nil {
		return fmt.Errorf("the lab's owner does not answer (is `lab run` still running?): %w", err)
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "%s %s %s\n", verb, component, grace); err != nil {
		return err
	}
	answer, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no answer from the lab's owner: %w", err)
	}
	if answer = strings.TrimSpace(answer); answer != "ok" {
		return errors.New(strings.TrimPrefix(answer, "error: "))
	}
	return nil
}
