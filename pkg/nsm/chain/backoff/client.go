// Package backoff owns the NSM client element that spaces out repeated failed
// requests of one connection. The SDK's heal re-requests a connection whose
// endpoint died as fast as the failures come back; toward a load balancer
// that died without unregistering, each try also renews the connection's
// addresses with the IPAM, so without a pause the proxy would hammer the IPAM
// for as long as the dead registration lasts.
package backoff

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/networkservicemesh/sdk/pkg/networkservice/core/next"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/causeway-net/causeway/internal/backoff"
)

type client struct {
	opts options

	mu       sync.Mutex
	failures map[string]*streak
}

// streak is a run of n consecutive failures of one connection id: pause is
// the wait before its next request, taken from b at each failure.
type streak struct {
	n     int
	b     *backoff.Backoff
	pause time.Duration
	last  time.Time
}

// NewClient returns an element that, after n consecutive failed requests
// of a connection id, waits min(Initial·2^(n-1), Max) before passing the
// next request of that id on. The pause never takes more than half of the
// request's remaining deadline, ends with the request's context (and with
// the client's life, WithLife), and is forgotten after a success, or once
// no request of that id has failed for twice the cap. A Close does not
// forget it: heal closes and re-requests the same id on every try.
func NewClient(opts ...Option) networkservice.NetworkServiceClient {
	o := options{initial: DefaultInitial, max: DefaultMax, life: context.Background()}
	for _, opt := range opts {
		opt(&o)
	}
	return &client{opts: o, failures: map[string]*streak{}}
}

func (c *client) delay(id string, deadline time.Time, hasDeadline bool) time.Duration {
	c.mu.Lock()
	var d time.Duration
	if s, ok := c.failures[id]; ok && time.Since(s.last) < 2*c.opts.max {
		d = s.pause
	}
	c.mu.Unlock()
	if d == 0 {
		return 0
	}
	if hasDeadline {
		d = min(d, time.Until(deadline)/2)
	}
	return max(d, 0)
}

func (c *client) Request(ctx context.Context, request *networkservice.NetworkServiceRequest, opts ...grpc.CallOption) (*networkservice.Connection, error) {
	id := request.GetConnection().GetId()
	deadline, ok := ctx.Deadline()
	if d := c.delay(id, deadline, ok); d > 0 {
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-c.opts.life.Done():
			t.Stop()
			return nil, fmt.Errorf("request of %s paused after failures: the client stops: %w", id, context.Cause(c.opts.life))
		case <-t.C:
		}
	}
	conn, err := next.Client(ctx).Request(ctx, request, opts...)
	c.record(id, err == nil, time.Now())
	return conn, err
}

// record counts a failure or ends the streak, and drops the streaks of ids
// that have not failed for twice the cap (connections that went away).
func (c *client) record(id string, ok bool, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if ok {
		delete(c.failures, id)
		return
	}
	for other, s := range c.failures {
		if now.Sub(s.last) >= 2*c.opts.max {
			delete(c.failures, other)
		}
	}
	s, found := c.failures[id]
	if !found {
		s = &streak{b: backoff.New(c.opts.initial, c.opts.max)}
		c.failures[id] = s
	}
	s.n++
	s.pause = s.b.Next()
	s.last = now
}

func (c *client) Close(ctx context.Context, conn *networkservice.Connection, opts ...grpc.CallOption) (*emptypb.Empty, error) {
	return next.Client(ctx).Close(ctx, conn, opts...)
}
