package nexthopcheck

import (
	"errors"
	"fmt"
	"time"
)

// Defaults of Settings (see docs/dataplane.md, "Datapath liveness", for
// how they were chosen).
const (
	DefaultInterval           = 50 * time.Millisecond
	DefaultFailuresBeforeDown = 8
	DefaultSuccessesBeforeUp  = 5
	DefaultHoldDown           = time.Second
)

// MinInterval is the shortest interval Settings accepts.
const MinInterval = 10 * time.Millisecond

// maxPenalty bounds the doubling of the hold-down: at most HoldDown << 5.
const maxPenalty = 5

// Settings are the knobs of a Checker. A zero field takes its default.
type Settings struct {
	// Off turns the probing off (peers are reported Unchecked).
	Off bool
	// Interval is the time between two probes of a peer, and the time a
	// probe has to be answered.
	Interval time.Duration
	// FailuresBeforeDown is how many probes in a row must be lost, without
	// a late answer to an earlier one either, for an Up peer to go Down.
	FailuresBeforeDown int
	// SuccessesBeforeUp is how many probes in a row a Down peer must
	// answer, after the hold-down, to come back Up.
	SuccessesBeforeUp int
	// HoldDown is the least time a Down peer stays Down once it answers
	// again; doubled for each flap, up to 32 times.
	HoldDown time.Duration
}

// withDefaults fills the zero fields and checks the others.
func (s Settings) withDefaults() (Settings, error) {
	if s.Interval == 0 {
		s.Interval = DefaultInterval
	}
	if s.FailuresBeforeDown == 0 {
		s.FailuresBeforeDown = DefaultFailuresBeforeDown
	}
	if s.SuccessesBeforeUp == 0 {
		s.SuccessesBeforeUp = DefaultSuccessesBeforeUp
	}
	if s.HoldDown == 0 {
		s.HoldDown = DefaultHoldDown
	}
	var errs []error
	if s.Interval < MinInterval {
		errs = append(errs, fmt.Errorf("interval %v: below %v", s.Interval, MinInterval))
	}
	if s.FailuresBeforeDown < 1 {
		errs = append(errs, fmt.Errorf("failures before down %d: below 1", s.FailuresBeforeDown))
	}
	if s.SuccessesBeforeUp < 1 {
		errs = append(errs, fmt.Errorf("successes before up %d: below 1", s.SuccessesBeforeUp))
	}
	if s.HoldDown < 0 {
		errs = append(errs, fmt.Errorf("hold-down %v: negative", s.HoldDown))
	}
	if err := errors.Join(errs...); err != nil {
		return s, fmt.Errorf("nexthop check settings: %w", err)
	}
	return s, nil
}

// Validate checks the settings as New does (zero fields take their
// defaults).
func (s Settings) Validate() error {
	_, err := s.withDefaults()
	return err
}

// DetectionTime is the longest time from a peer's last answer to its Down:
// the lost probes, each given one interval, plus the wait for the first of
// them.
func (s Settings) DetectionTime() time.Duration {
	s, _ = s.withDefaults()
	return time.Duration(s.FailuresBeforeDown+1) * s.Interval
}

// maxHoldDown is the hold-down of a peer at the highest penalty; a down that
// comes later than this after the previous return is not a flap.
func (s Settings) maxHoldDown() time.Duration {
	return s.HoldDown << maxPenalty
}
