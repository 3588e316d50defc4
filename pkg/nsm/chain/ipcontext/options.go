package ipcontext

import "log/slog"

// Option configures a server or client element.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger sets the logger used to report failed releases.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.logger = l
		}
	}
}

func newOptions(opts []Option) *options {
	o := &options{logger: slog.Default()}
	for _, opt := range opts {
		opt(o)
	}
	return o
}
