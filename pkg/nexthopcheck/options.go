package nexthopcheck

import (
	"io"
	"log/slog"

	"github.com/vishvananda/netns"
)

// Option configures a Checker.
type Option func(*options)

type options struct {
	log      *slog.Logger
	ns       netns.NsHandle
	onChange func([]Change)
}

func defaultOptions() options {
	return options{
		log:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ns:       netns.None(),
		onChange: func([]Change) {},
	}
}

// WithLogger sets the logger (default: discarded): one line per change of
// a peer's state or probe error.
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithNetNS opens the probe sockets in ns (default: the caller's
// namespace). The Checker does not close ns.
func WithNetNS(ns netns.NsHandle) Option {
	return func(o *options) { o.ns = ns }
}

// WithOnChange sets the function told of the state changes of each tick
// (see the package's contract).
func WithOnChange(f func([]Change)) Option {
	return func(o *options) {
		if f != nil {
			o.onChange = f
		}
	}
}
