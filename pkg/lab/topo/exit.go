package topo

import (
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Exit is how a recorded process ended, as the process that waited for it
// saw it.
type Exit struct {
	// Code is the exit status, -1 when a signal ended the process.
	Code int `json:"code"`
	// Signal names the signal that ended it ("SIGKILL"), if one did.
	Signal string `json:"signal,omitempty"`
	// Requested says what the run did to end it on purpose ("stop",
	// "kill"); empty when the process ended by itself.
	Requested string    `json:"requested,omitempty"`
	At        time.Time `json:"at"`
}

// ExitOf is the Exit of a process that ended with state; requested is what
// the run did to end it ("" if nothing).
func ExitOf(state *os.ProcessState, requested string) Exit {
	e := Exit{Code: -1, Requested: requested, At: time.Now().UTC()}
	if state == nil {
		return e
	}
	e.Code = state.ExitCode()
	if ws, ok := state.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = unix.SignalName(ws.Signal())
		if e.Signal == "" {
			e.Signal = fmt.Sprintf("signal %d", int(ws.Signal()))
		}
	}
	return e
}

// Status is how the process ended: "exit 2" or "signal SIGKILL".
func (e Exit) Status() string {
	if e.Signal != "" {
		return "signal " + e.Signal
	}
	return fmt.Sprintf("exit %d", e.Code)
}

// Failed reports whether the process ended by itself with a non-zero
// status or a signal.
func (e Exit) Failed() bool { return e.Requested == "" && (e.Code != 0 || e.Signal != "") }

// RecordExit records how the process pid that the run started (its last
// record of that pid without an exit) ended.
func (r *Run) RecordExit(pid int, e Exit) error {
	found := false
	err := r.record(func(s *State) {
		for i := len(s.Processes) - 1; i >= 0; i-- {
			if p := &s.Processes[i]; p.PID == pid && p.Exit == nil {
				p.Exit = &e
				found = true
				return
			}
		}
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf("record exit of %d: the run has no running record of it", pid)
	}
	return nil
}
