package labrun

import (
	"fmt"
	"slices"
	"strings"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// ComponentState is a component of the run as its record shows it: its
// last process, whether that runs and, once it ended, how.
type ComponentState struct {
	Name string
	// PID is the pid of its last process, 0 if it never started.
	PID     int
	Running bool
	// Exit is how its last process ended: nil while it runs, or when
	// nobody saw it end (the process that ran the lab was gone).
	Exit *topo.Exit
}

// Stopped reports whether the lab ended the component on purpose (`lab
// stop`, a scenario's kill, the teardown): the run does not expect it to
// run until it is started again.
func (c ComponentState) Stopped() bool {
	return !c.Running && c.Exit != nil && c.Exit.Requested != ""
}

// Down reports whether the run expects the component to run and it does
// not: it crashed, ended by itself, or never started.
func (c ComponentState) Down() bool { return !c.Running && !c.Stopped() }

// State is one word for the component: running, stopped (by the lab, on
// request), killed (likewise, with SIGKILL), crashed (ended by itself with
// a failure), exited (ended by itself with status 0), gone (ended, nobody
// saw how) or "not started".
func (c ComponentState) State() string {
	switch {
	case c.Running:
		return "running"
	case c.PID == 0:
		return "not started"
	case c.Exit == nil:
		return "gone"
	case c.Exit.Requested == "kill":
		return "killed"
	case c.Exit.Requested != "":
		return "stopped"
	case c.Exit.Failed():
		return "crashed"
	default:
		return "exited"
	}
}

// How is how its last process ended ("exit 1", "signal SIGKILL"), "-" while
// it runs, "unknown" when nobody saw it end.
func (c ComponentState) How() string {
	switch {
	case c.Running || c.PID == 0:
		return "-"
	case c.Exit == nil:
		return "unknown (the lab's owner did not see it end)"
	default:
		return c.Exit.Status()
	}
}

func (c ComponentState) String() string {
	if c.Running {
		return fmt.Sprintf("%s (running, pid %d)", c.Name, c.PID)
	}
	if c.PID == 0 {
		return c.Name + " (not started)"
	}
	return fmt.Sprintf("%s (%s: %s)", c.Name, c.State(), c.How())
}

// ComponentStates are the run's components (see Components) as they are
// now. The process that runs the lab knows from its own processes; another
// one from the run's record (see refresh), where that process writes how
// each of them ended.
func (l *Lab) ComponentStates() []ComponentState {
	last := map[string]topo.Process{}
	for _, p := range l.run.State().Processes {
		last[p.Name] = p
	}
	var out []ComponentState
	for _, n := range l.Components() {
		c := ComponentState{Name: n}
		if l.owner {
			if p := l.proc(n); p != nil {
				c.PID = p.cmd.Process.Pid
				if e, ended := p.exited(); ended {
					c.Exit = &e
				} else {
					c.Running = true
				}
			}
		} else if rec, ok := last[n]; ok {
			c.PID, c.Exit = rec.PID, rec.Exit
			c.Running = rec.Exit == nil && topo.Alive(rec.PID, rec.StartTime)
		}
		out = append(out, c)
	}
	return out
}

// ownerRunning reports whether the process that runs the lab (`lab run`,
// or the test that called Up) still runs.
func (l *Lab) ownerRunning() bool {
	st := l.state()
	return l.owner || topo.Alive(st.OwnerPID, st.OwnerStartTime)
}

// notRunning describes what the run expects to run and does not: the
// process that runs the lab and every component that is Down.
func (l *Lab) notRunning(states []ComponentState) []string {
	var out []string
	if !l.ownerRunning() {
		out = append(out, fmt.Sprintf("owner (lab run, pid %d) not running", l.state().OwnerPID))
	}
	for _, c := range states {
		if c.Down() {
			out = append(out, c.String())
		}
	}
	return out
}

// componentsRow is the check that every component the run expects runs.
func (l *Lab) componentsRow(r *Report, states []ComponentState) {
	down := l.notRunning(states)
	var running, stopped []string
	for _, c := range states {
		switch {
		case c.Running:
			running = append(running, c.Name)
		case c.Stopped():
			stopped = append(stopped, c.String())
		}
	}
	detail := fmt.Sprintf("%d of %d running", len(running), len(states)-len(stopped))
	if len(down) > 0 {
		detail += "; not running: " + strings.Join(down, ", ")
	}
	if len(stopped) > 0 {
		detail += "; stopped on request: " + strings.Join(stopped, ", ")
	}
	r.add("components running", len(down) == 0, "%s", detail)
}

// expected are the LBs and targets that should be up: all but those the
// lab stopped on request.
func (l *Lab) expected(states []ComponentState) (lbs, targets []string) {
	st := l.state()
	for _, c := range states {
		switch {
		case c.Stopped():
		case slices.Contains(st.LBs, c.Name):
			lbs = append(lbs, c.Name)
		case slices.Contains(st.Targets, c.Name):
			targets = append(targets, c.Name)
		}
	}
	return lbs, targets
}

// refresh reads the run's records again in a process that opened the run
// (Open): its owner records the components it starts and how they end.
func (l *Lab) refresh() error {
	if l.owner {
		return nil
	}
	if err := l.run.Reload(); err != nil {
		return err
	}
	st, err := loadState(l.run.Dir)
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.st = st
	l.mu.Unlock()
	return nil
}
