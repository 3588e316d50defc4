// Package nspwatch is Causeway's one client of the nsp.v1
// ConfigurationManager watches (Causeway's cmd/nsp or Meridio's NSP, same
// wire contract): WatchVIPs and WatchConduits deliver complete lists, re-open
// a broken stream with capped, jittered exponential backoff and keep the
// last list meanwhile. The proxy's VIP source (pkg/proxyd/vipsource) and the
// IPAM's conduit watcher (pkg/ipam) run on it; the caller dials and owns the
// gRPC connection.
package nspwatch

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	nspv1 "github.com/causeway-net/causeway/api/nsp/v1"
	"github.com/causeway-net/causeway/internal/backoff"
)

// Default retry delays of the NSP watches; MaxBackoff matches the default of
// NSM_GRPC_MAX_BACKOFF.
const (
	DefaultMinBackoff = 250 * time.Millisecond
	DefaultMaxBackoff = 5 * time.Second
)

// Option tunes a watch.
type Option func(*watchOpts)

type watchOpts struct {
	logger   *slog.Logger
	min, max time.Duration
}

// WithLogger sets the logger of a watch client.
func WithLogger(l *slog.Logger) Option { return func(o *watchOpts) { o.logger = l } }

// WithBackoff sets the first and the largest delay between attempts to
// re-open a watch that failed. The delay doubles after each failure and goes
// back to min once a message arrives. Non-positive values keep the defaults.
func WithBackoff(minDelay, maxDelay time.Duration) Option {
	return func(o *watchOpts) {
		if minDelay > 0 {
			o.min = minDelay
		}
		if maxDelay > 0 {
			o.max = maxDelay
		}
	}
}

func newWatchOpts(opts []Option) watchOpts {
	o := watchOpts{logger: slog.Default(), min: DefaultMinBackoff, max: DefaultMaxBackoff}
	for _, opt := range opts {
		opt(&o)
	}
	o.max = max(o.max, o.min)
	return o
}

// WatchVIPs watches the VIPs of trench through client until ctx is done,
// and calls update with the addresses of every list the server sends
// (ParseVIP). Addresses that do not parse are logged and skipped; the others
// are still delivered. It re-opens a broken watch with capped exponential
// backoff.
func WatchVIPs(ctx context.Context, client nspv1.ConfigurationManagerClient, trench string,
	update func([]netip.Prefix), opts ...Option) {
	o := newWatchOpts(opts)
	log := o.logger.With("watch", "vip", "trench", trench)
	filter := &nspv1.Vip{Trench: &nspv1.Trench{Name: trench}}
	watchStream(ctx, o, log,
		func(ctx context.Context) (grpc.ServerStreamingClient[nspv1.VipResponse], error) {
			return client.WatchVip(ctx, filter, failFast)
		},
		func(r *nspv1.VipResponse) {
			ps := make([]netip.Prefix, 0, len(r.GetVips()))
			for _, v := range r.GetVips() {
				p, err := ParseVIP(v.GetAddress())
				if err != nil {
					log.Warn("skipping invalid VIP", "name", v.GetName(), "error", err)
					continue
				}
				ps = append(ps, p)
			}
			update(ps)
		})
}

// WatchConduits watches the conduits matching filter (unset fields match all)
// through client until ctx is done, and calls update with the complete list
// once it is first known and again each time it changes. It re-opens a
// broken watch with capped exponential backoff and keeps the last list
// meanwhile. It is the one WatchConduit client: the IPAM's ConduitWatcher
// runs on it too.
func WatchConduits(ctx context.Context, client nspv1.ConfigurationManagerClient, filter *nspv1.Conduit,
	update func([]*nspv1.Conduit), opts ...Option) {
	o := newWatchOpts(opts)
	var last []*nspv1.Conduit
	sent := false
	watchStream(ctx, o, o.logger.With("watch", "conduit", "filter", filter),
		func(ctx context.Context) (grpc.ServerStreamingClient[nspv1.ConduitResponse], error) {
			return client.WatchConduit(ctx, filter, failFast)
		},
		func(r *nspv1.ConduitResponse) {
			cs := r.GetConduits()
			if sent && slices.EqualFunc(cs, last, func(a, b *nspv1.Conduit) bool { return proto.Equal(a, b) }) {
				return
			}
			last, sent = cs, true
			update(cs)
		})
}

// failFast makes a watch fail at once while the server is unreachable
// (whatever the connection's default call options say), so that the outage
// is logged and retried by watchStream rather than waited out in silence.
var failFast = grpc.WaitForReady(false)

// watchStream opens a server stream and hands each message to onMsg until ctx
// is done, re-opening it after a failure with capped, jittered exponential
// backoff. The first failure of an outage is a warning, the retries that
// follow are debug lines, and the first message after it says how long the
// outage lasted.
func watchStream[T any](ctx context.Context, o watchOpts, log *slog.Logger,
	open func(context.Context) (grpc.ServerStreamingClient[T], error), onMsg func(*T)) {
	b := backoff.New(o.min, o.max)
	var failures int
	var since time.Time
	for {
		err := func() error {
			sctx, cancel := context.WithCancel(ctx)
			defer cancel()
			stream, err := open(sctx)
			if err != nil {
				return err
			}
			for {
				msg, err := stream.Recv()
				if err != nil {
					return err
				}
				if failures > 0 {
					log.Info("watch re-established", "failedAttempts", failures, "after", time.Since(since).Round(time.Millisecond))
					failures = 0
				}
				b.Reset()
				onMsg(msg)
			}
		}()
		if ctx.Err() != nil {
			return
		}
		// Up to 20% less than the nominal delay, so that proxies restarted
		// together do not retry in lockstep.
		delay := b.Next()
		wait := delay - time.Duration(rand.Int64N(int64(delay)/5+1))
		if failures == 0 {
			since = time.Now()
			log.Warn("watch failed; keeping the last list and retrying", "error", err, "retryIn", wait)
		} else {
			log.Debug("watch still failing", "error", err, "attempt", failures+1, "retryIn", wait)
		}
		failures++
		if !backoff.Sleep(ctx, wait) {
			return
		}
	}
}
