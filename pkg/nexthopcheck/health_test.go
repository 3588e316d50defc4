package nexthopcheck

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// run drives a health with outcomes one interval apart.
type run struct {
	h   health
	now time.Time
	s   Settings
}

func newRun() *run {
	s, _ := Settings{Interval: 100 * time.Millisecond, FailuresBeforeDown: 3, SuccessesBeforeUp: 2, HoldDown: 500 * time.Millisecond}.withDefaults()
	now := time.Unix(0, 0)
	return &run{h: newHealth(now), now: now, s: s}
}

// do feeds outcomes ('.' answered, 'x' lost) and returns the states after
// each ('U' or 'D').
func (r *run) do(outcomes string) string {
	out := make([]byte, 0, len(outcomes))
	for _, o := range outcomes {
		r.now = r.now.Add(r.s.Interval)
		if o == '.' {
			r.h.answered(r.now, r.s)
		} else {
			r.h.lost(r.now, r.s)
		}
		out = append(out, "?UD"[r.h.state])
	}
	return string(out)
}

func TestHealthGoesDownAfterFailuresInARow(t *testing.T) {
	r := newRun()
	require.Equal(t, "UUUUUUUUD", r.do("xx.xx.xxx"), "losses that are not in a row do not count")
	require.Equal(t, uint64(1), r.h.downs)
}

func TestHealthReturnsAfterHoldDownAndSuccesses(t *testing.T) {
	r := newRun()
	require.Equal(t, "UUD", r.do("xxx"))
	// Answers from the first on: 500 ms of hold-down, i.e. up at the
	// sixth answer (the first starts the hold-down).
	require.Equal(t, "DDDDDU", r.do("......"))
}

func TestHealthOneLossWhileRecoveringDelaysTheReturn(t *testing.T) {
	r := newRun()
	r.do("xxx")
	// A loss only restarts the successes in a row, not the hold-down.
	require.Equal(t, "DDDDDU", r.do("...x.."))
	require.Equal(t, "DDDDDDU", newRun().do("xxx" + "....x..")[3:], "successes in a row are still needed")
}

func TestHealthRunOfLossesWhileRecoveringRestartsTheHoldDown(t *testing.T) {
	r := newRun()
	r.do("xxx")
	require.Equal(t, "DDDDDDDDDDU", r.do("..xxx......"))
}

func TestHealthHoldDownDoublesForFlaps(t *testing.T) {
	r := newRun()
	require.Equal(t, "U", r.do("xxx......")[8:])
	require.Equal(t, 500*time.Millisecond, r.h.holdDown(r.s))
	r.do("xxx")
	require.Equal(t, time.Second, r.h.holdDown(r.s), "down again soon after the return: a flap")
	require.Equal(t, "DDDDDDDDDDU", r.do("..........."))
	for range 10 {
		r.do("xxx")
		for r.h.state == Down {
			r.do(".")
		}
	}
	require.Equal(t, r.s.maxHoldDown(), r.h.holdDown(r.s), "the doubling stops at 32 times")
	// Up for longer than the longest hold-down: the next down is no flap.
	r.now = r.now.Add(r.s.maxHoldDown())
	r.do("xxx")
	require.Equal(t, r.s.HoldDown, r.h.holdDown(r.s))
}

func TestSettingsDefaultsAndErrors(t *testing.T) {
	s, err := Settings{}.withDefaults()
	require.NoError(t, err)
	require.Equal(t, Settings{Interval: DefaultInterval, FailuresBeforeDown: DefaultFailuresBeforeDown,
		SuccessesBeforeUp: DefaultSuccessesBeforeUp, HoldDown: DefaultHoldDown}, s)
	require.Less(t, Settings{}.DetectionTime(), 500*time.Millisecond, "the default detection time is within the aim")
	_, err = Settings{Interval: time.Millisecond, FailuresBeforeDown: -1, SuccessesBeforeUp: -1, HoldDown: -1}.withDefaults()
	require.ErrorContains(t, err, "interval 1ms")
	require.ErrorContains(t, err, "failures before down -1")
	require.ErrorContains(t, err, "successes before up -1")
	require.ErrorContains(t, err, "hold-down -1ns")
}

func TestStateReadsBackFromJSON(t *testing.T) {
	for _, st := range []State{Unchecked, Up, Down} {
		b, err := json.Marshal(Status{State: st})
		require.NoError(t, err)
		var back Status
		require.NoError(t, json.Unmarshal(b, &back))
		require.Equal(t, st, back.State)
	}
	var st State
	require.Error(t, st.UnmarshalText([]byte("sideways")))
}
