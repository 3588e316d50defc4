package topo

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// DefaultBase is where lab runs keep their state directories.
const DefaultBase = "/run/causeway-lab"

// stateFile is the record of a run inside its directory.
const stateFile = "state.json"

// Process is a process a run started, identified by pid and start time so
// that teardown never signals an unrelated process that reused the pid.
type Process struct {
	PID       int    `json:"pid"`
	StartTime uint64 `json:"startTime"`
	Name      string `json:"name,omitempty"`
	// Exit is how it ended, once the process that waited for it recorded
	// it (RecordExit); nil while it runs, or when nobody saw it end.
	Exit *Exit `json:"exit,omitempty"`
}

// Link is a link a run created outside its own namespaces.
type Link struct {
	NetNSPath string `json:"netns,omitempty"`
	Name      string `json:"name"`
}

// State is everything a run made; it is rewritten on every change so that a
// crash leaves an accurate record for Down.
type State struct {
	ID        string    `json:"id"`
	Created   time.Time `json:"created"`
	NetNS     []string  `json:"netns,omitempty"`
	Links     []Link    `json:"links,omitempty"`
	Processes []Process `json:"processes,omitempty"`
	Files     []string  `json:"files,omitempty"`
	// EmptyDirs are directories outside the run directory that the run
	// made but may share with others: Down removes each only if it is
	// empty, in reverse order (a child before its parent).
	EmptyDirs []string `json:"emptyDirs,omitempty"`
}

// Run is one lab run: a short random id, the prefix of its namespace names
// and its state directory <base>/<id>.
type Run struct {
	Dir string
	// Log is where Down reports the processes of the run it found without
	// a record (nil: nowhere).
	Log *slog.Logger

	mu    sync.Mutex
	state State
}

var idPattern = regexp.MustCompile(`^[0-9a-f]{4,16}$`)

// NewRun creates a run with a fresh id under base (DefaultBase when empty).
func NewRun(base string) (*Run, error) {
	if base == "" {
		base = DefaultBase
	}
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("new run id: %w", err)
	}
	id := hex.EncodeToString(b)
	dir := filepath.Join(base, id)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("create run base %s: %w", base, err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create run dir %s: %w", dir, err)
	}
	r := &Run{Dir: dir, state: State{ID: id, Created: time.Now().UTC()}}
	if err := r.save(); err != nil {
		return nil, err
	}
	return r, nil
}

// Reload reads the run's record again from its directory, for a process
// that opened the run (OpenRun) and follows what its owner records.
func (r *Run) Reload() error {
	data, err := os.ReadFile(filepath.Join(r.Dir, stateFile))
	if err != nil {
		return fmt.Errorf("reload run %s: %w", r.ID(), err)
	}
	var s State
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("reload run %s: %w", r.ID(), err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	// ID and Created never change (and are read without the lock).
	r.state.NetNS, r.state.Links, r.state.Processes = s.NetNS, s.Links, s.Processes
	r.state.Files, r.state.EmptyDirs = s.Files, s.EmptyDirs
	return nil
}

// OpenRun loads the run id under base (DefaultBase when empty), e.g. to tear
// down what a crashed process left.
func OpenRun(base, id string) (*Run, error) {
	if base == "" {
		base = DefaultBase
	}
	if !idPattern.MatchString(id) {
		return nil, fmt.Errorf("invalid run id %q", id)
	}
	dir := filepath.Join(base, id)
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return nil, fmt.Errorf("open run %s: %w", id, err)
	}
	r := &Run{Dir: dir}
	if err := json.Unmarshal(data, &r.state); err != nil {
		return nil, fmt.Errorf("open run %s: %w", id, err)
	}
	return r, nil
}

// ListRuns returns the ids of the runs recorded under base.
func ListRuns(base string) ([]string, error) {
	if base == "" {
		base = DefaultBase
	}
	entries, err := os.ReadDir(base)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	var ids []string
	for _, e := range entries {
		if e.IsDir() && idPattern.MatchString(e.Name()) {
			if _, err := os.Stat(filepath.Join(base, e.Name(), stateFile)); err == nil {
				ids = append(ids, e.Name())
			}
		}
	}
	return ids, nil
}

// ID is the run's id.
func (r *Run) ID() string { return r.state.ID }

// State is a copy of the run's record.
func (r *Run) State() State {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.state
	s.NetNS = append([]string(nil), s.NetNS...)
	s.Links = append([]Link(nil), s.Links...)
	s.Processes = append([]Process(nil), s.Processes...)
	s.Files = append([]string(nil), s.Files...)
	s.EmptyDirs = append([]string(nil), s.EmptyDirs...)
	return s
}

// Path is a path inside the run directory.
func (r *Run) Path(elem ...string) string { return filepath.Join(append([]string{r.Dir}, elem...)...) }

// NetNSName is the namespace name of role in this run: "cw<id>-<role>".
// Two runs never share one and names stay short (role up to 16 chars).
func (r *Run) NetNSName(role string) string { return "cw" + r.state.ID + "-" + role }

// AddNetNS creates the run's namespace for role, with loopback up, records
// it and returns its bind-mount path.
func (r *Run) AddNetNS(role string) (string, error) {
	if role == "" || len(role) > 16 || strings.ContainsAny(role, "/ ") {
		return "", fmt.Errorf("invalid namespace role %q", role)
	}
	name := r.NetNSName(role)
	if err := r.record(func(s *State) { s.NetNS = append(s.NetNS, name) }); err != nil {
		return "", err
	}
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		return "", fmt.Errorf("ip netns add %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	if out, err := exec.Command("ip", "-n", name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		return "", fmt.Errorf("lo up in %s: %w: %s", name, err, strings.TrimSpace(string(out)))
	}
	return NetNSPath(name), nil
}

// RecordLink records a link made outside the run's namespaces (links inside
// them go away with the namespace).
func (r *Run) RecordLink(l Link) error {
	return r.record(func(s *State) { s.Links = append(s.Links, l) })
}

// RecordProcess records a process the run started.
func (r *Run) RecordProcess(pid int, name string) error {
	st, err := ProcessStartTime(pid)
	if err != nil {
		return fmt.Errorf("record process %d: %w", pid, err)
	}
	return r.record(func(s *State) { s.Processes = append(s.Processes, Process{PID: pid, StartTime: st, Name: name}) })
}

// RecordFile records a file or directory made outside the run directory.
func (r *Run) RecordFile(path string) error {
	return r.record(func(s *State) { s.Files = append(s.Files, path) })
}

// RecordMissingDirs records, before something is about to make them, the
// directories of path (path and its parents) that do not exist yet: Down
// removes those that are empty then. For a directory shared with whatever
// else may use it meanwhile, such as NSM's /var/lib/networkservicemesh.
func (r *Run) RecordMissingDirs(path string) error {
	var missing []string
	for d := filepath.Clean(path); d != "/" && d != "."; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("record %s: %w", d, err)
		}
		missing = append([]string{d}, missing...)
	}
	if len(missing) == 0 {
		return nil
	}
	return r.record(func(s *State) { s.EmptyDirs = append(s.EmptyDirs, missing...) })
}

func (r *Run) record(change func(*State)) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	change(&r.state)
	return r.saveLocked()
}

func (r *Run) save() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.saveLocked()
}

func (r *Run) saveLocked() error {
	data, err := json.MarshalIndent(&r.state, "", "  ")
	if err != nil {
		return fmt.Errorf("encode run state: %w", err)
	}
	tmp := filepath.Join(r.Dir, "."+stateFile+".tmp")
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return fmt.Errorf("write run state: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(r.Dir, stateFile)); err != nil {
		return fmt.Errorf("write run state: %w", err)
	}
	return nil
}

// ProcessStartTime reads field 22 of /proc/<pid>/stat (clock ticks since
// boot): with the pid, it tells a process from a later one given the same pid.
func ProcessStartTime(pid int) (uint64, error) {
	_, start, err := procStat(pid)
	return start, err
}

// Alive reports whether the process pid that started at start still runs.
func Alive(pid int, start uint64) bool {
	if pid <= 0 {
		return false
	}
	st, err := ProcessStartTime(pid)
	return err == nil && st == start
}

// Down removes everything the run made: it stops its processes (see
// stopProcesses), deletes the links and namespaces, removes the files and
// finally the run directory. The logs stay in LogDir, with a copy of the
// run's record (how each process ended), and only the last KeptLogs
// finished runs of the base keep theirs. It carries on past failures and
// reports them all; running it again is harmless.
func (r *Run) Down(grace time.Duration) error {
	s := r.State()
	errs := r.stopProcesses(s.Processes, grace)
	for _, l := range s.Links {
		args := []string{"link", "del", l.Name}
		if l.NetNSPath != "" {
			args = append([]string{"-n", filepath.Base(l.NetNSPath)}, args...)
		}
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
			errs = append(errs, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out))))
		}
	}
	for _, name := range s.NetNS {
		if _, err := os.Stat(NetNSPath(name)); errors.Is(err, os.ErrNotExist) {
			continue
		}
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("ip netns del %s: %w: %s", name, err, strings.TrimSpace(string(out))))
		}
	}
	for _, f := range s.Files {
		if err := os.RemoveAll(f); err != nil {
			errs = append(errs, fmt.Errorf("remove %s: %w", f, err))
		}
	}
	for i := len(s.EmptyDirs) - 1; i >= 0; i-- {
		// Not empty (someone else's now) or gone: left as it is.
		_ = os.Remove(s.EmptyDirs[i])
	}
	if len(errs) == 0 {
		// The logs stay (LogDir), with a copy of the record; a failure
		// to keep them is reported but leaves nothing of the run behind.
		kerr := r.keepLogs(s)
		if err := os.RemoveAll(r.Dir); err != nil {
			errs = append(errs, fmt.Errorf("remove run dir: %w", err))
		}
		if kerr != nil {
			errs = append(errs, kerr)
		}
	}
	return errors.Join(errs...)
}

// markedRounds bounds how many times stopProcesses looks again for marked
// processes that appeared while it stopped the others.
const markedRounds = 3

// stopProcesses stops the recorded processes and every other live process
// that carries the run's marker (MarkerEnv): one the run started but did not
// record (it crashed in between), or one that a component started. Each
// round sends SIGTERM, SIGKILL to those left after grace, and waits for them
// to end; the next round takes the marked processes that appeared meanwhile
// (started by a process as it was stopped).
func (r *Run) stopProcesses(recorded []Process, grace time.Duration) []error {
	var errs []error
	// A process is its pid and start time (names differ: the recorded
	// one is the component, a marked one's its command).
	type id struct {
		pid   int
		start uint64
	}
	seen := map[id]bool{}
	var procs []Process
	for _, p := range recorded {
		seen[id{p.PID, p.StartTime}] = true
		if p.running() {
			procs = append(procs, p)
		}
	}
	for round := 0; ; round++ {
		marked, err := r.MarkedProcesses()
		if err != nil {
			errs = append(errs, err)
		}
		for _, p := range marked {
			if seen[id{p.PID, p.StartTime}] {
				continue
			}
			seen[id{p.PID, p.StartTime}] = true
			r.logger().Warn("stopping a process of the run that it did not record",
				"run", r.ID(), "pid", p.PID, "process", p.Name)
			procs = append(procs, p)
		}
		if len(procs) == 0 {
			return errs
		}
		if round == markedRounds {
			for _, p := range procs {
				errs = append(errs, fmt.Errorf("process %d (%s) of the run appeared after %d rounds of stopping", p.PID, p.Name, markedRounds))
			}
			return errs
		}
		errs = append(errs, stopAll(procs, grace)...)
		procs = nil
	}
}

func (r *Run) logger() *slog.Logger {
	if r.Log == nil {
		return slog.New(slog.DiscardHandler)
	}
	return r.Log
}

// stopAll sends SIGTERM to the processes, SIGKILL to those that still run
// after grace, and waits up to grace again for those to end.
func stopAll(procs []Process, grace time.Duration) []error {
	var errs []error
	for _, p := range procs {
		if p.running() {
			_ = Signal(p.PID, p.StartTime, syscall.SIGTERM)
		}
	}
	waitEnd(procs, grace)
	for _, p := range procs {
		if p.running() {
			if err := Signal(p.PID, p.StartTime, syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
				errs = append(errs, fmt.Errorf("kill %d (%s): %w", p.PID, p.Name, err))
			}
		}
	}
	waitEnd(procs, grace)
	for _, p := range procs {
		if p.running() {
			errs = append(errs, fmt.Errorf("process %d (%s) still runs after SIGKILL", p.PID, p.Name))
		}
	}
	return errs
}

// waitEnd waits until none of the processes runs, or for timeout.
func waitEnd(procs []Process, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for _, p := range procs {
		for p.running() && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
	}
}
