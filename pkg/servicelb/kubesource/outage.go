package kubesource

import (
	"context"
	"errors"
	"log/slog"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// outage follows whether the API server answers the informers' lists and
// watches: the first failure after a success is one warning and one count,
// the first success after a failure one info line. meanwhile says what
// its owner does while the API server is away (nil: the Source's words).
type outage struct {
	log       *slog.Logger
	meanwhile string

	mu    sync.Mutex
	away  bool
	count uint64
}

// observe records the result of one list or watch call.
func (o *outage) observe(err error) {
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) ||
		apierrors.IsResourceExpired(err) || apierrors.IsGone(err)) {
		return // our own stop, or a version too old that the reflector lists again for: not an absence
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case err == nil && o.away:
		o.away = false
		o.log.Info("API server reachable again; resyncing services and endpoint slices")
	case err != nil && !o.away:
		o.away = true
		o.count++
		meanwhile := o.meanwhile
		if meanwhile == "" {
			meanwhile = "serving the last known services until it answers"
		}
		o.log.Warn("API server unreachable or refusing; "+meanwhile, "error", err)
	}
}

// state is whether the API server is away and how many outages there were.
func (o *outage) state() (bool, uint64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.away, o.count
}
