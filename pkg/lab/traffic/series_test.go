package traffic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// series builds probes 10ms apart from a pattern: '.' success, 'x' failure.
func series(t0 time.Time, pattern string) traffic.Series {
	var s traffic.Series
	for i, c := range pattern {
		p := traffic.Probe{Start: t0.Add(time.Duration(i) * 10 * time.Millisecond), Target: "t"}
		if c == 'x' {
			p.Target, p.Err = "", errors.New("lost")
		}
		s = append(s, p)
	}
	return s
}

func TestSeriesGaps(t *testing.T) {
	t0 := time.Unix(1000, 0)
	s := series(t0, "..xx...xxxxx..x")
	gaps := s.Gaps()
	require.Len(t, gaps, 3)
	require.Equal(t, 2, gaps[0].Failures)
	require.Equal(t, 20*time.Millisecond, gaps[0].Len())
	require.Equal(t, t0.Add(70*time.Millisecond), gaps[1].Start)
	require.Equal(t, 50*time.Millisecond, gaps[1].Len())
	require.False(t, gaps[1].Open)
	require.True(t, gaps[2].Open, "a trailing failure never recovered")

	// The open gap wins: the path is still broken.
	require.True(t, s.LongestGap().Open)
	closed := series(t0, "..xx...xxxxx..")
	require.Equal(t, 5, closed.LongestGap().Failures)
	require.Equal(t, 50*time.Millisecond, closed.LongestGap().Len())
	require.Zero(t, series(t0, "....").LongestGap().Failures)
	require.Equal(t, 40*time.Millisecond, closed.LongestGap().Witnessed(), "from the first failed probe to the last")

	// The prober held up after a failure: the next probe, a success, ran
	// 229 ms later. The gap is that long, but one failure witnessed it.
	stalled := append(series(t0, ".x"), traffic.Probe{Start: t0.Add(239 * time.Millisecond), Target: "t"})
	require.Equal(t, 229*time.Millisecond, stalled.LongestGap().Len())
	require.Zero(t, stalled.LongestGap().Witnessed())
	require.Equal(t, 40*time.Millisecond, append(closed, stalled...).LongestWitnessed().Witnessed(), "the run that probes saw longest")

	require.Equal(t, 8, s.Failures())
	require.Equal(t, 7, s.Targets()["t"])
	after := s.After(t0.Add(65 * time.Millisecond))
	require.Len(t, after, 8)
	require.Len(t, s.Before(t0.Add(65*time.Millisecond)), 7)
	first, ok := s.FirstOKAfter(t0.Add(70 * time.Millisecond))
	require.True(t, ok)
	require.Equal(t, t0.Add(120*time.Millisecond), first)
	last, ok := s.LastFailure()
	require.True(t, ok)
	require.Equal(t, t0.Add(140*time.Millisecond), last)
	require.ErrorContains(t, s.FirstError(), "lost")
}

func TestSeriesCuts(t *testing.T) {
	t0 := time.Unix(1000, 0)
	require.Empty(t, series(t0, "..x...xx..x.").Cuts(), "lone losses and pairs between answers are blips")
	cuts := series(t0, "..x..xxx..xx..x").Cuts()
	require.Len(t, cuts, 2)
	require.Equal(t, 3, cuts[0].Failures, "three in a row cut the path")
	require.True(t, cuts[1].Open, "a failure never followed by an answer is a cut")
	require.Empty(t, series(t0, "....").Cuts())
}
