package nexthopcheck

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A peer whose every answer comes one interval late (its probe is lost,
// the previous one's answer arrives) stays up: it is alive. One that does
// not answer at all goes down.
func TestLateAnswersKeepAPeerUp(t *testing.T) {
	s, err := Settings{}.withDefaults()
	require.NoError(t, err)
	c := &Checker{s: s, o: defaultOptions()}
	now := time.Unix(0, 0)
	p := newProbe(Peer{Addr: netip.MustParseAddr("10.0.0.2")}, now)
	interval := func(answer bool) bool {
		now = now.Add(s.Interval)
		p.seq++
		p.pending, p.answered, p.sentAt = true, false, now
		if answer {
			p.hear(reply{seq: p.seq - 1}, now) // the previous request's
		}
		return c.judge(p, now.Add(s.Interval))
	}
	for range 4 * s.FailuresBeforeDown {
		require.False(t, interval(true))
	}
	require.Equal(t, Up, p.h.state)
	require.Equal(t, uint64(4*s.FailuresBeforeDown), p.lost, "each probe lost its own answer")
	require.Equal(t, uint64(4*s.FailuresBeforeDown), p.late)
	for i := range s.FailuresBeforeDown {
		require.Equal(t, i == s.FailuresBeforeDown-1, interval(false))
	}
	require.Equal(t, Down, p.h.state)
}
