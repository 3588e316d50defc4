package ipam

import (
	"context"
	"log/slog"
	"time"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/pkg/nspwatch"
)

// ConduitSyncer receives the conduit lists of the configuration server
// (implemented by Engine).
type ConduitSyncer interface {
	SyncConduits(names []string) ConduitChanges
}

// ConduitWatcher follows nsp.v1.ConfigurationManager/WatchConduit for one
// trench and hands every received list to the engine. The stream is
// nspwatch.WatchConduits': it reconnects with exponential backoff (from
// minBackoff up to MaxBackoff, reset after a received list) and keeps the
// last list meanwhile. The watcher never drains anything on its own: an
// unreachable server changes nothing.
type ConduitWatcher struct {
	Client     nspv1.ConfigurationManagerClient
	Trench     string
	Syncer     ConduitSyncer
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

// minBackoff is the first delay before re-opening a failed watch.
const minBackoff = 100 * time.Millisecond

// Run watches until ctx is done.
func (w *ConduitWatcher) Run(ctx context.Context) {
	log := w.Logger
	if log == nil {
		log = slog.Default()
	}
	maxBackoff := w.MaxBackoff
	if maxBackoff <= 0 {
		maxBackoff = 5 * time.Second
	}
	established := false
	nspwatch.WatchConduits(ctx, w.Client, &nspv1.Conduit{Trench: &nspv1.Trench{Name: w.Trench}},
		func(cs []*nspv1.Conduit) {
			names := w.ours(cs)
			if !established {
				log.Info("conduit watch established", "conduits", names)
				established = true
			}
			if ch := w.Syncer.SyncConduits(names); ch != (ConduitChanges{}) {
				log.Info("conduit list applied", "draining", ch.Draining, "revived", ch.Revived, "removed", ch.Removed, "conduits", names)
			}
		},
		nspwatch.WithLogger(log.With("trench", w.Trench)), nspwatch.WithBackoff(minBackoff, maxBackoff))
}

// ours returns the names of the conduits of the watcher's trench. The
// server filters by trench; an unset trench is taken as ours.
func (w *ConduitWatcher) ours(cs []*nspv1.Conduit) []string {
	var names []string
	for _, c := range cs {
		if tn := c.GetTrench().GetName(); tn != "" && tn != w.Trench {
			continue
		}
		names = append(names, c.GetName())
	}
	return names
}
