package kubesource

import (
	"context"
	"log/slog"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// withClientGoLogger returns ctx carrying a klog logger for the informers
// that logs to log at debug level, whatever client-go's level: the source
// logs the events that matter itself (an outage once, not one error per
// retry of the reflector).
func withClientGoLogger(ctx context.Context, log *slog.Logger) context.Context {
	h := debugHandler{log.With("component", "client-go").Handler()}
	return klog.NewContext(ctx, logr.FromSlogHandler(h))
}

// debugHandler passes every record on at debug level.
type debugHandler struct{ slog.Handler }

func (h debugHandler) Enabled(ctx context.Context, _ slog.Level) bool {
	return h.Handler.Enabled(ctx, slog.LevelDebug)
}

func (h debugHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = slog.LevelDebug
	return h.Handler.Handle(ctx, r)
}

func (h debugHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return debugHandler{h.Handler.WithAttrs(attrs)}
}

func (h debugHandler) WithGroup(name string) slog.Handler {
	return debugHandler{h.Handler.WithGroup(name)}
}
