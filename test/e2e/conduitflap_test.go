package e2e_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// dropConduit drops the lab's conduit from the configuration and waits
// until the IPAM has taken the edit (it logs the conduit draining).
func dropConduit(t *testing.T, l *labrun.Lab) {
	t.Helper()
	was := strings.Count(logOf(l, "ipam"), "conduit draining")
	require.NoError(t, l.ListConduit(false))
	require.Eventually(t, func() bool { return strings.Count(logOf(l, "ipam"), "conduit draining") > was }, waitLong, poll,
		"the IPAM drains the dropped conduit")
}

// TestConduitFlap drops the lab's conduit from the configuration (a valid
// edit that renames it) for 5 s and for 60 s, then restores it. The IPAM
// drains the conduit instead of deleting it: no address in use is ever
// handed out again (every address of every namespace is checked for
// duplicates), the targets keep serving throughout, a target that joins
// while the conduit is gone gets no address until it is back, and
// afterwards the targets still have the addresses they had and the new
// target gets its own.
func TestConduitFlap(t *testing.T) {
	for _, gone := range []time.Duration{5 * time.Second, 60 * time.Second} {
		t.Run(gone.String(), func(t *testing.T) {
			l := newLab(t, nil)
			ctx, cancel := context.WithTimeout(context.Background(), gone+4*time.Minute)
			defer cancel()
			before := targetAddrs(l)
			ps := startProbers(t, ctx, l, vipOf(t, l, true))
			waitProbes(t, ps, time.Time{}, 20, "probes before the edit")

			dropped := mark(ps, "conduit dropped")
			dropConduit(t, l)
			// A new target that joins meanwhile asks for new addresses:
			// refused until the conduit is back.
			joiner := "late-1"
			require.NoError(t, l.StartTarget(joiner))
			time.Sleep(gone)
			require.Empty(t, l.TargetAddrs(joiner), "no new address in a conduit that is not configured")
			requireUniqueAddrs(t, l)
			back := mark(ps, "conduit back")
			require.NoError(t, l.ListConduit(true))

			requireGreen(t, ctx, l, waitLong, "after the conduit came back")
			requireUniqueAddrs(t, l)
			for name, a := range before {
				if name != joiner {
					require.ElementsMatch(t, a, l.TargetAddrs(name), "%s keeps its addresses", name)
				}
			}
			for network, p := range ps {
				s := p.Stop().After(dropped).Before(back)
				t.Logf("FIGURE: conduit gone for %v (%s): %d of %d probes failed", gone, network, s.Failures(), len(s))
				requireNoCut(t, s, "%s: the targets keep serving while the conduit is gone (first error: %v)", network, s.FirstError())
			}
		})
	}
}

// TestConduitRemovedForGood: the conduit leaves the configuration and does
// not come back. The addresses in use stay with their holders (no
// duplicate, traffic keeps flowing), a new target gets none, and a target
// that leaves for longer than the release delay gives its addresses back:
// coming back, it is refused too.
func TestConduitRemovedForGood(t *testing.T) {
	l := newLab(t, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dropConduit(t, l)
	kept := l.Targets()[1:]
	leaver := l.Targets()[0]
	require.NoError(t, l.StopTarget(leaver))
	time.Sleep(releaseDelay + 2*time.Second)
	require.NoError(t, l.StartTarget(leaver))
	require.NoError(t, l.StartTarget("late-1"))
	time.Sleep(5 * time.Second)
	require.Empty(t, l.TargetAddrs(leaver), "released addresses are not given out again in a removed conduit")
	require.Empty(t, l.TargetAddrs("late-1"), "a new request in a removed conduit gets no address")
	requireUniqueAddrs(t, l)
	requireServed(t, ctx, l, kept, "the targets that kept their addresses serve")
	require.NoError(t, l.StopTarget(leaver))
	require.NoError(t, l.StopTarget("late-1"))
}
