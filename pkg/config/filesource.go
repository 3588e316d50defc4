package config

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"slices"

	"github.com/causeway-net/causeway/pkg/config/file"
)

// FileSource is a VIPSource reading the VIPs of a trench from a configuration
// file (the format of package config/file, the same as cmd/nsp serves). It
// follows edits of the file; a broken edit is logged and ignored, and the
// last good VIP list stays.
type FileSource struct {
	path   string
	trench string
	logger *slog.Logger
	opts   []file.WatchOption
}

// NewFileSource returns a source of the VIPs of trench in the file at path.
// opts tune the file watch (poll interval, debounce).
func NewFileSource(path, trench string, logger *slog.Logger, opts ...file.WatchOption) *FileSource {
	if logger == nil {
		logger = slog.Default()
	}
	return &FileSource{path: path, trench: trench, logger: logger, opts: opts}
}

// Run implements VIPSource. It fails at once if the file cannot be read or is
// invalid when Run starts.
func (s *FileSource) Run(ctx context.Context, update func([]netip.Prefix)) error {
	cfg, err := file.Load(s.path)
	if err != nil {
		return fmt.Errorf("static VIP source: %w", err)
	}
	log := s.logger.With("trench", s.trench)
	deliver := dedup(update)
	apply := func(cfg *file.Config) {
		if !slices.ContainsFunc(cfg.Trenches, func(t file.Trench) bool { return t.Name == s.trench }) {
			log.Warn("trench is not defined in the VIP file; it has no VIPs", "path", s.path)
		}
		deliver(cfg.VIPPrefixes(s.trench))
	}
	apply(cfg)
	opts := append([]file.WatchOption{file.WithLogger(log)}, s.opts...)
	return file.Watch(ctx, s.path, cfg, apply, opts...)
}
