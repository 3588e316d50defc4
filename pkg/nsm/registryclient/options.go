package registryclient

import (
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	"google.golang.org/grpc"
)

// Option changes a default of the clients.
type Option func(*options)

type options struct {
	dialOptions []grpc.DialOption
	dialTimeout time.Duration
	retry       bool
	extra       []registry.NetworkServiceEndpointRegistryClient
}

func newOptions(opts []Option) *options {
	o := &options{dialTimeout: 300 * time.Millisecond}
	for _, opt := range opts {
		opt(o)
	}
	return o
}

// WithDialOptions sets the options of the dial to the NSMgr.
func WithDialOptions(opts ...grpc.DialOption) Option {
	return func(o *options) { o.dialOptions = append(o.dialOptions, opts...) }
}

// WithDialTimeout bounds each dial to the NSMgr (default 300 ms, the
// SDK's); zero or less keeps the default.
func WithDialTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.dialTimeout = d
		}
	}
}

// WithRetry puts the SDK's retry element in the chains: a failed call is
// tried again until its context ends (default off: the caller retries).
func WithRetry() Option {
	return func(o *options) { o.retry = true }
}

// WithEndpointElements appends elements (sendfd, recvfd, an expiry setter)
// at the end of the endpoint client's chain, before its connect.
func WithEndpointElements(elements ...registry.NetworkServiceEndpointRegistryClient) Option {
	return func(o *options) { o.extra = append(o.extra, elements...) }
}
