package traffic

import (
	"fmt"
	"time"
)

// Series is a run of probes ordered by start time.
type Series []Probe

// Gap is a maximal run of failed probes.
type Gap struct {
	// Start is the start of the first failed probe.
	Start time.Time
	// End is the start of the first successful probe after the run, or the
	// start of the last probe when none succeeded after it (Open).
	End time.Time
	// Last is the start of the last failed probe of the run.
	Last time.Time
	// Failures is the number of failed probes in the run.
	Failures int
	// Open is set when no probe succeeded after the run.
	Open bool
}

// Len is the gap's duration: from the first failure to the first success
// after it. It is at least the time the path was broken minus one probe
// interval, and at most that plus one interval and a probe's latency.
func (g Gap) Len() time.Duration { return g.End.Sub(g.Start) }

// Witnessed is the part of the gap that failed probes saw: from the first
// failed probe's start to the last one's. Len is longer when no probe ran
// for a while after the last failure (the prober itself held up, on a
// busy machine): one failed probe then makes a long Len, but a Witnessed
// of zero.
func (g Gap) Witnessed() time.Duration { return g.Last.Sub(g.Start) }

func (g Gap) String() string {
	if g.Failures == 0 {
		return "no gap"
	}
	open := ""
	if g.Open {
		open = ", never recovered"
	}
	return fmt.Sprintf("%v (%d failed probes%s)", g.Len().Round(time.Millisecond), g.Failures, open)
}

// Gaps lists every run of failures.
func (s Series) Gaps() []Gap {
	var gaps []Gap
	var cur *Gap
	for _, p := range s {
		if !p.OK() {
			if cur == nil {
				gaps = append(gaps, Gap{Start: p.Start})
				cur = &gaps[len(gaps)-1]
			}
			cur.Failures++
			cur.End, cur.Last = p.Start, p.Start
			continue
		}
		if cur != nil {
			cur.End = p.Start
			cur = nil
		}
	}
	if cur != nil {
		cur.Open = true
	}
	return gaps
}

// LongestGap is the longest run of failures (zero Gap when none failed). An
// open gap counts as longer than any closed one.
func (s Series) LongestGap() Gap { return s.longest(Gap.Len) }

// LongestWitnessed is the run of failures that failed probes saw longest
// (Gap.Witnessed; zero Gap when none failed). An open gap counts as longer
// than any closed one.
func (s Series) LongestWitnessed() Gap { return s.longest(Gap.Witnessed) }

func (s Series) longest(length func(Gap) time.Duration) Gap {
	var best Gap
	for _, g := range s.Gaps() {
		if best.Failures == 0 || (g.Open && !best.Open) || (g.Open == best.Open && length(g) > length(best)) {
			best = g
		}
	}
	return best
}

// After is the part of the series whose probes started at or after t.
func (s Series) After(t time.Time) Series {
	for i, p := range s {
		if !p.Start.Before(t) {
			return s[i:]
		}
	}
	return nil
}

// Before is the part of the series whose probes started before t.
func (s Series) Before(t time.Time) Series {
	for i, p := range s {
		if !p.Start.Before(t) {
			return s[:i]
		}
	}
	return s
}

// Failures counts the failed probes.
func (s Series) Failures() int {
	n := 0
	for _, p := range s {
		if !p.OK() {
			n++
		}
	}
	return n
}

// Targets counts the successful probes per answering target.
func (s Series) Targets() map[string]int {
	m := map[string]int{}
	for _, p := range s {
		if p.OK() {
			m[p.Target]++
		}
	}
	return m
}

// FirstOKAfter is the start of the first successful probe started at or
// after t.
func (s Series) FirstOKAfter(t time.Time) (time.Time, bool) {
	for _, p := range s.After(t) {
		if p.OK() {
			return p.Start, true
		}
	}
	return time.Time{}, false
}

// LastFailure is the start of the last failed probe.
func (s Series) LastFailure() (time.Time, bool) {
	for i := len(s) - 1; i >= 0; i-- {
		if !s[i].OK() {
			return s[i].Start, true
		}
	}
	return time.Time{}, false
}

// FirstError is the first failure's error, for messages.
func (s Series) FirstError() error {
	for _, p := range s {
		if !p.OK() {
			return p.Err
		}
	}
	return nil
}

// String summarises the series: probes, failures, longest gap.
func (s Series) String() string {
	return fmt.Sprintf("%d probes, %d failed, longest gap %v", len(s), s.Failures(), s.LongestGap())
}

// BlipFailures is the most failed probes in a row that make a blip rather
// than a cut of the path. A path broken for as long as three probe
// intervals (30 ms at the default) fails three probes in a row; on a
// loaded machine a lone flow is now and then lost with the path intact
// (its SYN or datagram dropped from a full backlog, or the prober itself
// not scheduled in time), each one between answered probes.
const BlipFailures = 2

// IsCut reports whether the gap is a cut of the path: more than
// BlipFailures failed probes in a row, or a run that never ended.
func (g Gap) IsCut() bool { return g.Open || g.Failures > BlipFailures }

// Cuts are the gaps that cut the path (see Gap.IsCut).
func (s Series) Cuts() []Gap {
	var cuts []Gap
	for _, g := range s.Gaps() {
		if g.IsCut() {
			cuts = append(cuts, g)
		}
	}
	return cuts
}
