package topo

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// MarkerEnv is the environment variable that StartProcess gives every
// process of a run, with the run's Marker as value. A process inherits it
// from the one that started it, so it also marks what a component starts.
const MarkerEnv = "CAUSEWAY_LAB_RUN"

// Marker is the value of MarkerEnv in the processes of this run: its id and
// creation time, so that it names this run only (two bases may hold runs of
// the same id, never created at the same nanosecond).
func (r *Run) Marker() string {
	return r.state.ID + "@" + r.state.Created.UTC().Format(time.RFC3339Nano)
}

// MarkedProcesses are the live processes that carry this run's marker, other
// than the calling process, whether the run recorded them or not.
func (r *Run) MarkedProcesses() ([]Process, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("list processes: %w", err)
	}
	want := []byte(MarkerEnv + "=" + r.Marker())
	self := os.Getpid()
	var out []Process
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		// The start time before and after the environment: both the same,
		// the environment read is that of the process of that start time
		// (not of a later one given the same pid).
		state, start, err := procStat(pid)
		if err != nil || state == 'Z' {
			continue // gone, or a zombie: nothing to stop
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil || !hasEntry(env, want) {
			continue // gone, a kernel thread (no environment), or not ours
		}
		name := ""
		if comm, err := os.ReadFile("/proc/" + e.Name() + "/comm"); err == nil {
			name = strings.TrimSpace(string(comm))
		}
		if _, again, err := procStat(pid); err != nil || again != start {
			continue
		}
		out = append(out, Process{PID: pid, StartTime: start, Name: name})
	}
	return out, nil
}

// hasEntry reports whether the NUL-separated environment env holds entry.
func hasEntry(env, entry []byte) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, entry) {
			return true
		}
	}
	return false
}

// procStat reads the state (field 3) and start time (field 22, clock ticks
// since boot) of /proc/<pid>/stat.
func procStat(pid int) (byte, uint64, error) {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	s := string(data)
	// The command name (field 2) may hold spaces; fields restart after ')'.
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat", pid)
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("malformed /proc/%d/stat: %w", pid, err)
	}
	return fields[0][0], start, nil
}

// Running reports whether pid is a process that has not ended: alive and
// not a zombie waiting for its parent.
func Running(pid int) bool {
	state, _, err := procStat(pid)
	return err == nil && state != 'Z'
}

// running reports whether p still runs: alive and not a zombie waiting for
// its parent (which no signal ends).
func (p Process) running() bool {
	state, start, err := procStat(p.PID)
	return err == nil && start == p.StartTime && state != 'Z'
}
