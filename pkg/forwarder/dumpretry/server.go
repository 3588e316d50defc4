package dumpretry

import (
	"context"
	"errors"
	"strings"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"github.com/vishvananda/netlink"
	"google.golang.org/protobuf/types/known/emptypb"
)

// Defaults of NewServer. Each attempt is interrupted or not independently
// of the ones before, so the attempts bound how often churn can make a
// request fail: on a loaded machine, under the churn of
// TestKernelDumpsUnderChurn, 6 in 10 listings were interrupted, and with 10
// attempts about one request in 200 still failed. 40 attempts take at most
// about 3.7 s of pauses, well inside a request's time (and the request's
// context ends them sooner).
const (
	DefaultAttempts = 40
	DefaultPause    = 5 * time.Millisecond
	maxPause        = 100 * time.Millisecond
)

// Option configures the element.
type Option func(*server)

// WithAttempts sets how many times a request is tried in all (default
// DefaultAttempts).
func WithAttempts(n int) Option { return func(s *server) { s.attempts = max(n, 1) } }

// WithPause sets the pause before the first retry; it doubles for each
// further one, up to 100ms (default DefaultPause).
func WithPause(d time.Duration) Option { return func(s *server) { s.pause = d } }

// WithRetried is called once per retry (for a counter or a log line).
func WithRetried(fn func(error)) Option { return func(s *server) { s.retried = fn } }

type server struct {
	attempts int
	pause    time.Duration
	retried  func(error)
}

// NewServer returns the element. Put it before the elements that program
// the kernel (sdk-kernel's connectioncontextkernel, and the client chain
// that does the same on the other side).
func NewServer(opts ...Option) networkservice.NetworkServiceServer {
	s := &server{attempts: DefaultAttempts, pause: DefaultPause, retried: func(error) {}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Interrupted tells whether err comes from an interrupted netlink dump,
// also when it lost its type on the way (a gRPC status, a string wrap).
func Interrupted(err error) bool {
	return err != nil && (errors.Is(err, netlink.ErrDumpInterrupted) ||
		strings.Contains(err.Error(), netlink.ErrDumpInterrupted.Error()))
}

func (s *server) Request(ctx context.Context, r *networkservice.NetworkServiceRequest) (*networkservice.Connection, error) {
	orig := r.Clone()
	pause := s.pause
	for attempt := 1; ; attempt++ {
		if attempt > 1 {
			r = orig.Clone() // the same request again, not the failed one's changes
		}
		conn, err := next.Server(ctx).Request(ctx, r)
		if !Interrupted(err) || attempt >= s.attempts {
			return conn, err
		}
		s.retried(err)
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(pause):
		}
		pause = min(2*pause, maxPause)
	}
}

func (s *server) Close(ctx context.Context, conn *networkservice.Connection) (*emptypb.Empty, error) {
	return next.Server(ctx).Close(ctx, conn)
}
