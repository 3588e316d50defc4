package mtu

// Option configures a server or client element.
type Option func(*options)

type options struct {
	mtu uint32
}

// WithMTU sets the MTU written into every request's connection context. Zero
// (the default) leaves the context untouched.
func WithMTU(mtu uint32) Option {
	return func(o *options) { o.mtu = mtu }
}

func newOptions(opts []Option) *options {
	o := &options{}
	for _, opt := range opts {
		opt(o)
	}
	return o
}
