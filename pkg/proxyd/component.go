package proxyd

import (
	"context"
	"errors"
	"fmt"
)

// component is one part of the daemon. start brings it up, bounded by ctx
// (background work it starts lives until stop, not until ctx), and returns
// the function that takes it down again: that function returns only once
// everything the component started has stopped. A start that fails leaves
// nothing of its component running.
type component struct {
	name  string
	start func(ctx context.Context) (stop func() error, err error)
}

// running is a started component, as the daemon stops it.
type running struct {
	name string
	stop func() error
}

// startAll starts the components in order and records each one that runs;
// it stops at the first failure (stopAll then takes down those that run).
func (d *Daemon) startAll(ctx context.Context, cs []component) error {
	for _, c := range cs {
		stop, err := c.start(ctx)
		if err != nil {
			return fmt.Errorf("start %s: %w", c.name, err)
		}
		d.running = append(d.running, running{name: c.name, stop: stop})
		d.log.Debug("component started", "part", c.name)
	}
	return nil
}

// stopAll stops the running components in the reverse order of their
// start, each one stopped and waited for before the next.
func (d *Daemon) stopAll() error {
	var errs []error
	for i := len(d.running) - 1; i >= 0; i-- {
		c := d.running[i]
		d.log.Debug("stopping component", "part", c.name)
		if err := c.stop(); err != nil {
			errs = append(errs, fmt.Errorf("stop %s: %w", c.name, err))
		}
	}
	d.running = nil
	return errors.Join(errs...)
}

// noStop is the stop of a component that leaves nothing running.
func noStop() error { return nil }
