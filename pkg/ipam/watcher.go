package ipam

import (
	"context"
	"log/slog"
	"time"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/backoff"
)

// ConduitSyncer receives the conduit lists of the configuration server
// (implemented by Engine).
type ConduitSyncer interface {
	SyncConduits(names []string) ConduitChanges
}

// ConduitWatcher follows nsp.v1.ConfigurationManager/WatchConduit for one
// trench and hands every received list to the engine. It reconnects with
// exponential backoff (up to MaxBackoff, reset after a received list) and
// never drains anything on its own: an unreachable server changes nothing.
type ConduitWatcher struct {
	Client     nspv1.ConfigurationManagerClient
	Trench     string
	Syncer     ConduitSyncer
	MaxBackoff time.Duration
	Logger     *slog.Logger
}

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
	b := backoff.New(100*time.Millisecond, maxBackoff)
	for {
		received, err := w.watch(ctx, log)
		if ctx.Err() != nil {
			return
		}
		if received {
			b.Reset()
		}
		wait := b.Next()
		log.Warn("conduit watch interrupted; retrying", "error", err, "retry_in", wait.String())
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}

// watch runs one stream; it reports whether any list was received.
func (w *ConduitWatcher) watch(ctx context.Context, log *slog.Logger) (bool, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := w.Client.WatchConduit(ctx, &nspv1.Conduit{Trench: &nspv1.Trench{Name: w.Trench}})
	if err != nil {
		return false, err
	}
	received := false
	for {
		resp, err := stream.Recv()
		if err != nil {
			return received, err
		}
		var names []string
		for _, c := range resp.GetConduits() {
			// The server filters by trench; an unset trench is taken as ours.
			if tn := c.GetTrench().GetName(); tn != "" && tn != w.Trench {
				continue
			}
			names = append(names, c.GetName())
		}
		if !received {
			log.Info("conduit watch established", "conduits", names)
		}
		received = true
		if ch := w.Syncer.SyncConduits(names); ch != (ConduitChanges{}) {
			log.Info("conduit list applied", "draining", ch.Draining, "revived", ch.Revived, "removed", ch.Removed, "conduits", names)
		}
	}
}
