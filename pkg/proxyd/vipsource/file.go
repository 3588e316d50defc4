package vipsource

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/internal/yamlfile"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
)

// FileSource is a VIPSource reading the VIPs of a trench from a configuration
// file (the format of package pkg/nspd/configfile, the one cmd/nsp serves),
// followed through configfile.Watch. A file that is missing or invalid is waited
// for: until a valid version appears no VIPs are known and none are
// delivered. Once VIPs are known, a broken edit or a deletion of the file is
// logged and the last good VIP list stays (the data path keeps its VIP
// rules); a version that comes back is delivered if it differs.
type FileSource struct {
	path   string
	trench string
	logger *slog.Logger
	opts   []yamlfile.WatchOption
}

// Messages of a file that cannot be used, by whether VIPs are known yet.
const (
	missingAtStart     = "VIP file does not exist; it will be used when it appears, no VIPs are known until then"
	removedKeepingVIPs = "VIP file removed; keeping the last good VIPs until it is back"
	refusedAtStart     = "VIP file refused; no VIPs are known until a valid version appears"
	refusedKeepingVIPs = "VIP file refused; keeping the last good VIPs"
)

// NewFileSource returns a source of the VIPs of trench in the file at path.
// opts tune the file watch (poll interval, debounce).
func NewFileSource(path, trench string, logger *slog.Logger, opts ...yamlfile.WatchOption) *FileSource {
	if logger == nil {
		logger = slog.Default()
	}
	return &FileSource{path: path, trench: trench, logger: logger, opts: opts}
}

// Run implements VIPSource. It fails only when the file's directory cannot
// be watched; a missing or invalid file is reported and waited for.
func (s *FileSource) Run(ctx context.Context, update func([]netip.Prefix)) error {
	w := &fileVIPs{path: s.path, trench: s.trench, log: s.logger.With("trench", s.trench), deliver: dedup(update)}
	opts := append([]yamlfile.WatchOption{yamlfile.WithLogger(w.log), yamlfile.WithRejectLog(w.refused)}, s.opts...)
	if err := configfile.Watch(ctx, s.path, nil, w.apply, opts...); err != nil {
		return fmt.Errorf("static VIP source %s: %w", s.path, err)
	}
	return nil
}

// fileVIPs turns the versions of the file into VIP lists; its methods run
// on the watch goroutine.
type fileVIPs struct {
	path    string
	trench  string
	log     *slog.Logger
	deliver func([]netip.Prefix)
	known   bool // a valid version was delivered
}

func (w *fileVIPs) apply(cfg *configfile.Config) {
	if !slices.ContainsFunc(cfg.Trenches, func(t configfile.Trench) bool { return t.Name == w.trench }) {
		w.log.Warn("trench is not defined in the VIP file; it has no VIPs", "path", w.path)
	}
	w.known = true
	w.deliver(cfg.VIPPrefixes(w.trench))
}

// refused says what a file that cannot be used means for the VIPs.
func (w *fileVIPs) refused(err error) {
	missing := errors.Is(err, fs.ErrNotExist)
	switch {
	case missing && !w.known:
		w.log.Warn(missingAtStart, "path", w.path)
	case missing:
		w.log.Warn(removedKeepingVIPs, "path", w.path)
	case !w.known:
		w.log.Error(refusedAtStart, "path", w.path, "error", err)
	default:
		w.log.Error(refusedKeepingVIPs, "path", w.path, "error", err)
	}
}
