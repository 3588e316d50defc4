package traffic

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// maxErrors is how many flow errors a Tally keeps as examples.
const maxErrors = 5

// Tally counts the answers of a batch of flows per answering target.
type Tally struct {
	// Total is the number of flows tried.
	Total int
	// Answers counts the flows each target (by the name it answered) served.
	Answers map[string]int
	// Errors counts flows that got no answer (connection refused or timed
	// out, datagram lost, short read).
	Errors int
	// Examples holds the first few flow errors.
	Examples []error
}

func newTally() Tally { return Tally{Answers: map[string]int{}} }

func (t *Tally) add(name string, err error) {
	t.Total++
	if err != nil {
		t.Errors++
		if len(t.Examples) < maxErrors {
			t.Examples = append(t.Examples, err)
		}
		return
	}
	t.Answers[name]++
}

// OK is the number of flows that got an answer.
func (t Tally) OK() int { return t.Total - t.Errors }

// Share is the fraction of all flows tried that target name served.
func (t Tally) Share(name string) float64 {
	if t.Total == 0 {
		return 0
	}
	return float64(t.Answers[name]) / float64(t.Total)
}

// String is a one-line summary: "300 flows, 0 errors: target-1=97 target-2=101 ...".
func (t Tally) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d flows, %d errors:", t.Total, t.Errors)
	for _, name := range slices.Sorted(maps.Keys(t.Answers)) {
		fmt.Fprintf(&b, " %s=%d", name, t.Answers[name])
	}
	if len(t.Examples) > 0 {
		fmt.Fprintf(&b, " (first error: %v)", t.Examples[0])
	}
	return b.String()
}

// Merge adds the counts of o to t.
func (t *Tally) Merge(o Tally) {
	if t.Answers == nil {
		t.Answers = map[string]int{}
	}
	t.Total += o.Total
	t.Errors += o.Errors
	for name, n := range o.Answers {
		t.Answers[name] += n
	}
	for _, err := range o.Examples {
		if len(t.Examples) < maxErrors {
			t.Examples = append(t.Examples, err)
		}
	}
}
