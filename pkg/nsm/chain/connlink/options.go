package connlink

import "log/slog"

// Option configures a Matcher or an element.
type Option func(*options)

type options struct {
	logger *slog.Logger
}

// WithLogger sets the logger.
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
