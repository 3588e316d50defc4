package nexthopcheck

import "time"

// health is the verdict on one peer, driven by the outcome of each probe.
// It holds no clock: the caller says when.
type health struct {
	state  State
	since  time.Time
	fails  int // probes lost in a row
	passes int // probes answered in a row
	// recovering is when a Down peer started answering again (zero: it
	// has not, or a run of losses since has cancelled it).
	recovering time.Time
	// returned is the time of the last move from Down to Up (zero:
	// never), and penalty the number of flaps in a row.
	returned time.Time
	penalty  int
	downs    uint64
}

func newHealth(now time.Time) health {
	return health{state: Up, since: now}
}

// holdDown is the hold-down the peer serves at its next return.
func (h *health) holdDown(s Settings) time.Duration {
	return s.HoldDown << h.penalty
}

// answered records an answered probe; it reports whether the state changed.
func (h *health) answered(now time.Time, s Settings) bool {
	h.fails = 0
	h.passes++
	if h.state != Down {
		return false
	}
	if h.recovering.IsZero() {
		h.recovering = now
	}
	if h.passes < s.SuccessesBeforeUp || now.Sub(h.recovering) < h.holdDown(s) {
		return false
	}
	h.state, h.since, h.returned, h.recovering = Up, now, now, time.Time{}
	return true
}

// lost records a lost probe; it reports whether the state changed.
func (h *health) lost(now time.Time, s Settings) bool {
	h.passes = 0
	h.fails++
	if h.fails < s.FailuresBeforeDown {
		return false
	}
	if h.state == Down {
		h.recovering = time.Time{} // dead again: the hold-down starts over
		return false
	}
	h.flapped(now, s)
	h.state, h.since, h.recovering = Down, now, time.Time{}
	h.downs++
	return true
}

// flapped raises the penalty of a peer that goes down soon after its
// return, and clears it for one that stayed up long enough.
func (h *health) flapped(now time.Time, s Settings) {
	switch {
	case h.returned.IsZero() || now.Sub(h.returned) >= s.maxHoldDown():
		h.penalty = 0
	case h.penalty < maxPenalty:
		h.penalty++
	}
}
