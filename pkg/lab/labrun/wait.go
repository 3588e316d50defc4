package labrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// DefaultSettleTimeout bounds how long WaitGreen waits by default (`lab
// run`, `lab check -wait`, `lab start` and `lab restart`).
const DefaultSettleTimeout = 3 * time.Minute

// ErrNotGreen is the error of WaitGreen when the checks did not all pass in
// time.
var ErrNotGreen = errors.New("checks not green")

// waitGreenPeriod is the pause between two rounds of checks.
const waitGreenPeriod = time.Second

// WaitGreen runs Check until every check passes, for at most timeout or
// until ctx ends, and returns the last report. On progress it writes a line
// when what is still failing changes, and every 10 s. The error wraps
// ErrNotGreen (naming the checks still failing) or ctx's.
func (l *Lab) WaitGreen(ctx context.Context, timeout time.Duration, progress io.Writer) (Report, error) {
	start := time.Now()
	deadline := start.Add(timeout)
	var last string
	var lastAt time.Time
	for {
		rep, err := l.Check(ctx)
		if err == nil && rep.OK() {
			return rep, nil
		}
		var failing []string
		for _, r := range rep.Failed() {
			failing = append(failing, r.Name)
		}
		if err != nil {
			failing = append(failing, err.Error())
		}
		line := strings.Join(failing, ", ")
		if ctx.Err() != nil {
			return rep, fmt.Errorf("lab %s: waiting for the checks: %w", l.ID(), ctx.Err())
		}
		if time.Now().After(deadline) {
			return rep, fmt.Errorf("lab %s: %w within %s; failing: %s", l.ID(), ErrNotGreen, timeout, line)
		}
		if line != last || time.Since(lastAt) > 10*time.Second {
			fmt.Fprintf(progress, "  %5.1fs  %d/%d checks passed; waiting for: %s\n", time.Since(start).Seconds(),
				len(rep.Rows)-len(rep.Failed()), len(rep.Rows), line)
			last, lastAt = line, time.Now()
		}
		select {
		case <-ctx.Done():
			return rep, fmt.Errorf("lab %s: waiting for the checks: %w", l.ID(), ctx.Err())
		case <-time.After(waitGreenPeriod):
		}
	}
}
