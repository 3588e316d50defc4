package topo

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"
)

// KeptLogs is how many finished runs of a base keep their logs: Down keeps
// the run's and removes those of older finished runs beyond it.
const KeptLogs = 5

// logsDir is the directory, under a run base, of the runs' log directories.
const logsDir = "logs"

// recordCopy is the copy of the run's record (state.json) that Down leaves
// in the log directory: every process of the run and how it ended.
const recordCopy = "run-state.json"

// LogDir is the run's directory of process logs, <base>/logs/<id>. It is
// outside the run directory: Down keeps it (see KeptLogs), so that the
// logs of a finished or failed run can be read after its teardown.
func (r *Run) LogDir() string { return LogDir(filepath.Dir(r.Dir), r.ID()) }

// LogDir is the log directory of the run id under base (DefaultBase when
// empty), also once the run is down.
func LogDir(base, id string) string {
	if base == "" {
		base = DefaultBase
	}
	return filepath.Join(base, logsDir, id)
}

// keepLogs leaves the run's log directory with a copy of its record and
// its end time, and prunes the log directories of older finished runs.
func (r *Run) keepLogs(s State) error {
	dir := r.LogDir()
	if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
		return nil // the run started no process
	}
	var errs []error
	if data, err := os.ReadFile(filepath.Join(r.Dir, stateFile)); err == nil {
		if err := os.WriteFile(filepath.Join(dir, recordCopy), data, 0o644); err != nil {
			errs = append(errs, fmt.Errorf("keep the run's record with its logs: %w", err))
		}
	}
	now := time.Now()
	if err := os.Chtimes(dir, now, now); err != nil { // the run's end: the order of pruning
		errs = append(errs, fmt.Errorf("stamp log dir: %w", err))
	}
	if err := pruneLogs(filepath.Dir(r.Dir), s.ID, KeptLogs); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// pruneLogs removes the log directories of the finished runs under base
// (those whose run directory is gone) but the keep most recently ended;
// current, the run ending now, is always kept. The logs of a run still
// recorded are never touched.
func pruneLogs(base, current string, keep int) error {
	root := filepath.Join(base, logsDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return fmt.Errorf("prune logs: %w", err)
	}
	type finished struct {
		id    string
		ended time.Time
	}
	var done []finished
	for _, e := range entries {
		if !e.IsDir() || !idPattern.MatchString(e.Name()) || e.Name() == current {
			continue
		}
		if _, err := os.Stat(filepath.Join(base, e.Name(), stateFile)); err == nil {
			continue // a run still recorded: not finished
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		done = append(done, finished{e.Name(), info.ModTime()})
	}
	// Newest first; the current run takes one of the places.
	slices.SortFunc(done, func(a, b finished) int { return b.ended.Compare(a.ended) })
	var errs []error
	for i, f := range done {
		if i < keep-1 {
			continue
		}
		if err := os.RemoveAll(filepath.Join(root, f.id)); err != nil {
			errs = append(errs, fmt.Errorf("prune logs of run %s: %w", f.id, err))
		}
	}
	return errors.Join(errs...)
}
