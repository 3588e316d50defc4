package kubesource

import "log/slog"

// Option configures a Source or a Publisher.
type Option func(*options)

type options struct {
	log *slog.Logger
}

// WithLogger logs to log (default slog.Default()).
func WithLogger(log *slog.Logger) Option {
	return func(o *options) { o.log = log }
}

func newOptions(opts []Option) options {
	o := options{log: slog.Default()}
	for _, opt := range opts {
		opt(&o)
	}
	return o
}
