package yamlfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"time"

	"github.com/fsnotify/fsnotify"
)

// Defaults of Watch.
const (
	DefaultPollInterval = 10 * time.Second
	DefaultDebounce     = 100 * time.Millisecond
)

type watchOptions struct {
	logger    *slog.Logger
	poll      time.Duration
	debounce  time.Duration
	onReject  func(error)
	rejectLog func(error)
	onRecover func()
}

// WatchOption tunes Watch.
type WatchOption func(*watchOptions)

// WithLogger sets the logger for accepted and rejected versions of the configfile.
func WithLogger(l *slog.Logger) WatchOption { return func(o *watchOptions) { o.logger = l } }

// WithPollInterval sets the period of the backstop re-read that catches
// changes the file-system notifications miss (for example when path is a
// symlink into another directory). Zero or negative keeps the default.
func WithPollInterval(d time.Duration) WatchOption {
	return func(o *watchOptions) {
		if d > 0 {
			o.poll = d
		}
	}
}

// WithDebounce sets how long Watch waits after the last notification before it
// reads the file, so that an editor's truncate-then-write is read once, whole.
func WithDebounce(d time.Duration) WatchOption {
	return func(o *watchOptions) {
		if d > 0 {
			o.debounce = d
		}
	}
}

// WithRejectHook is called, on the watch goroutine, with the reason each time a
// new version of the file cannot be read or is invalid.
func WithRejectHook(fn func(error)) WatchOption { return func(o *watchOptions) { o.onReject = fn } }

// WithRejectLog replaces the watch's own log line for a version it rejects
// (or a file it cannot read, missing included) with fn, for a caller that
// says in its own words what the problem means for what it serves. fn is
// called on the watch goroutine, once per new problem, as the reject hook.
func WithRejectLog(fn func(error)) WatchOption { return func(o *watchOptions) { o.rejectLog = fn } }

// WithRecoverHook is called, on the watch goroutine, when a valid version
// of the file follows a rejected (or unreadable) one and equals the
// configuration in force, so that nothing is delivered: the edit was undone.
// A caller that shows the last rejection clears it here. (A valid version
// that differs is delivered to onChange as any other.)
func WithRecoverHook(fn func()) WatchOption { return func(o *watchOptions) { o.onRecover = fn } }

// Summarizer is implemented by decoded files that describe themselves in
// the "configuration loaded" log line (slog key-value pairs).
type Summarizer interface {
	Summary() []any
}

// WatchParsed follows the file at path until ctx is done: parse decodes and
// validates each new version, and onChange receives every valid one that
// differs (reflect.DeepEqual) from the previous; last is what the caller
// already has (nil if none). A version that cannot be read or that parse
// rejects is logged with its reason (and given to the reject hook) and
// skipped: the last good version stays in force.
//
// It watches the parent directory rather than the file, so that it
// survives editors that replace the file by renaming a new one over it and
// Kubernetes ConfigMap volumes that swap a symlinked directory; a periodic
// re-read is the backstop. onChange runs on the watch goroutine. It returns
// nil when ctx is done, or an error if it cannot watch the directory.
func WatchParsed[T any](ctx context.Context, path string, parse func([]byte) (*T, error), last *T,
	onChange func(*T), opts ...WatchOption) error {
	o := watchOptions{logger: slog.Default(), poll: DefaultPollInterval, debounce: DefaultDebounce}
	for _, opt := range opts {
		opt(&o)
	}
	fsw, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch config file: %w", err)
	}
	defer func() { _ = fsw.Close() }()
	dir := filepath.Dir(path)
	if err := fsw.Add(dir); err != nil {
		return fmt.Errorf("watch config directory %s: %w", dir, err)
	}

	r := reloader[T]{path: path, parse: parse, last: last, onChange: onChange, opts: &o}
	r.reload()

	poll := time.NewTicker(o.poll)
	defer poll.Stop()
	debounce := time.NewTimer(o.debounce)
	debounce.Stop()
	defer debounce.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case _, ok := <-fsw.Events:
			if !ok {
				return errors.New("config file watcher closed")
			}
			// Any event in the directory may be the file itself, a rename over
			// it, or a ConfigMap symlink swap: re-read once things settle.
			debounce.Reset(o.debounce)
		case err, ok := <-fsw.Errors:
			if !ok {
				return errors.New("config file watcher closed")
			}
			o.logger.Warn("config file watcher error; re-reading the file", "path", path, "error", err)
			debounce.Reset(o.debounce)
		case <-debounce.C:
			r.reload()
		case <-poll.C:
			r.reload()
		}
	}
}

// reloader reads the file and decides what to deliver and what to report.
type reloader[T any] struct {
	path     string
	parse    func([]byte) (*T, error)
	last     *T
	onChange func(*T)
	opts     *watchOptions

	lastData    []byte // content last parsed, valid or not
	lastProblem string // last reported problem, to report each once
}

func (r *reloader[T]) reload() {
	data, err := os.ReadFile(r.path)
	if err != nil {
		r.lastData = nil
		r.reject(fmt.Errorf("read config: %w", err))
		return
	}
	if r.lastData != nil && bytes.Equal(data, r.lastData) {
		return
	}
	r.lastData = data
	cfg, err := r.parse(data)
	if err != nil {
		r.reject(err)
		return
	}
	recovered := r.lastProblem != ""
	r.lastProblem = ""
	if r.last != nil && reflect.DeepEqual(cfg, r.last) {
		if recovered {
			// Said, or the last word in the log would be the rejection.
			r.opts.logger.Info("configuration valid again, the same as the one in force", "path", r.path)
			if r.opts.onRecover != nil {
				r.opts.onRecover()
			}
		}
		return
	}
	r.last = cfg
	attrs := []any{"path", r.path}
	if s, ok := any(cfg).(Summarizer); ok {
		attrs = append(attrs, s.Summary()...)
	}
	r.opts.logger.Info("configuration loaded", attrs...)
	r.onChange(cfg)
}

func (r *reloader[T]) reject(err error) {
	if err.Error() == r.lastProblem {
		return
	}
	r.lastProblem = err.Error()
	if r.opts.rejectLog != nil {
		r.opts.rejectLog(err)
	} else {
		r.opts.logger.Error("configuration rejected; keeping the last good configuration",
			"path", r.path, "error", err)
	}
	if r.opts.onReject != nil {
		r.opts.onReject(err)
	}
}
