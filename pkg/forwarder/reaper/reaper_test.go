package reaper

import (
	"context"
	"errors"
	"testing"

	"github.com/networkservicemesh/sdk/pkg/networkservice/common/begin"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// run is a connection as begin keeps it: a Close enters the chain through
// the server element, and is counted.
type run struct {
	r      *Reaper
	id     string
	closes int
}

func (f *run) Request(...begin.Option) <-chan error { return done() }

func (f *run) Close(...begin.Option) <-chan error {
	f.closes++
	f.r.closed(f.id, f)
	return done()
}

// newReaperOf is newReaper whose sweeps' Closes, as begin's, do not run
// once their context is done (begin's options cannot be read here).
func newReaperOf(live func() (map[uint64]bool, error)) *Reaper {
	r := newReaper(live)
	r.close = func(ctx context.Context, f begin.EventFactory) <-chan error {
		if ctx.Err() != nil {
			return done()
		}
		return f.Close()
	}
	return r
}

func done() <-chan error {
	ch := make(chan error)
	close(ch)
	return ch
}

// namespaces is what the fake /proc shows alive.
type namespaces struct {
	live map[uint64]bool
	err  error
}

func (n *namespaces) list() (map[uint64]bool, error) { return n.live, n.err }

func alive(inos ...uint64) map[uint64]bool {
	m := make(map[uint64]bool)
	for _, i := range inos {
		m[i] = true
	}
	return m
}

// tracking is a reaper over a fake /proc that shows live, with connection
// "c" tracked in the namespaces ends.
func tracking(live map[uint64]bool, ends ...uint64) (*namespaces, *Reaper, *run) {
	ns := &namespaces{live: live}
	r := newReaperOf(ns.list)
	c := &run{r: r, id: "c"}
	r.track("c", c, ends)
	return ns, r, c
}

// seenAlive is tracking with the ends alive, seen so by one sweep.
func seenAlive(ends ...uint64) (*namespaces, *Reaper, *run) {
	ns, r, c := tracking(alive(ends...), ends...)
	sweeps(r, 1)
	return ns, r, c
}

// dueClose runs two sweeps without their Closes, which orphan ends need to
// be judged, and returns what is due: one Close.
func dueClose(t *testing.T, r *Reaper) []due {
	t.Helper()
	ctx := context.Background()
	r.sweep(ctx)
	dues := r.sweep(ctx)
	require.Len(t, dues, 1)
	return dues
}

func sweeps(r *Reaper, n int) {
	for range n {
		r.Sweep(context.Background())
	}
}

func TestOrphanedNamespaceClosesItsConnection(t *testing.T) {
	ns, r, c := seenAlive(5, 6)
	ns.live = alive(6) // the client's pod is gone
	sweeps(r, 1)
	require.Zero(t, c.closes, "one sweep is not enough")
	sweeps(r, 1)
	require.Equal(t, 1, c.closes, "closed once, through the chain")
	sweeps(r, 3)
	require.Equal(t, 1, c.closes, "a closed connection is not closed again")
}

func TestNamespaceNeverSeenAliveIsNotJudged(t *testing.T) {
	// A forwarder that sees none of the pods' processes (no hostPID).
	_, r, c := tracking(alive(), 5, 6)
	sweeps(r, 5)
	require.Zero(t, c.closes)
}

func TestOneMissIsForgiven(t *testing.T) {
	ns, r, c := seenAlive(5)
	for range 3 {
		ns.live = alive()
		sweeps(r, 1)
		ns.live = alive(5)
		sweeps(r, 1)
	}
	require.Zero(t, c.closes)
}

func TestFailedListingJudgesNothing(t *testing.T) {
	ns, r, c := seenAlive(5)
	ns.live, ns.err = nil, errors.New("no /proc")
	sweeps(r, 4)
	require.Zero(t, c.closes)
}

func TestRefreshKeepsWhatWasSeenAndMoveStartsAgain(t *testing.T) {
	ns, r, c := seenAlive(5, 6)
	r.track("c", c, []uint64{5, 6}) // a refresh
	ns.live = alive(6)
	sweeps(r, 2)
	require.Equal(t, 1, c.closes)

	// Healed toward another endpoint (7), not yet seen: not judged.
	ns.live = alive(5, 6)
	d := &run{r: r, id: "d"}
	r.track("d", d, []uint64{5, 6})
	sweeps(r, 1)
	r.track("d", d, []uint64{5, 7})
	ns.live = alive(5)
	sweeps(r, 3)
	require.Zero(t, d.closes)
}

func TestLateCloseSparesTheNextRun(t *testing.T) {
	ns, r, first := seenAlive(5)
	ns.live = alive()
	dues := dueClose(t, r)

	// Before the sweep's Close runs, the connection is closed by its
	// client and requested again under the same id.
	r.closed("c", first)
	second := &run{r: r, id: "c"}
	r.track("c", second, []uint64{8})

	r.closeAll(dues)
	require.Zero(t, first.closes, "the late Close does not run")
	require.Contains(t, r.conns, "c", "the next run is still tracked")
	r.closed("c", second)
	require.NotContains(t, r.conns, "c", "and its Close ends its watch")
	r.closed("x", nil) // a Close of an unknown connection
}

func TestParseNetNS(t *testing.T) {
	for _, tc := range []struct {
		in  string
		ino uint64
		ok  bool
	}{
		{"net:[4026531840]", 4026531840, true},
		{"mnt:[4026531840]", 0, false},
		{"net:[x]", 0, false},
		{"net:[12", 0, false},
	} {
		ino, ok := parseNetNS(tc.in)
		require.Equal(t, tc.ok, ok, tc.in)
		require.Equal(t, tc.ino, ino, tc.in)
	}
	ino, ok := mountedNetNS("612 29 0:4 net:[4026532657] /run/netns/cw-a rw,nosuid shared:312 - nsfs nsfs rw")
	require.True(t, ok)
	require.Equal(t, uint64(4026532657), ino)
	_, ok = mountedNetNS("25 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw")
	require.False(t, ok)
	_, ok = mountedNetNS("")
	require.False(t, ok)
}

// TestLateCloseSparesTheConnectionRequestedAgain: begin keeps one event
// factory per connection id for as long as it is established, across
// re-requests: a reselect (closed, then requested toward another endpoint)
// and a move to another endpoint without a Close both keep it. A sweep's
// Close that was due before such a Request, and runs after it, must not
// tear the connection down in its new namespaces.
func TestLateCloseSparesTheConnectionRequestedAgain(t *testing.T) {
	for _, tc := range []struct {
		name     string
		reselect bool
	}{{"reselected", true}, {"moved", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ns, r, c := seenAlive(5, 6)
			ns.live = alive(5) // the endpoint's pod is gone
			dues := dueClose(t, r)

			// Before the sweep's Close runs, the client's Request takes the
			// connection to the endpoint's new pod (7), with the same factory.
			if tc.reselect {
				r.closed("c", c)
			}
			r.track("c", c, []uint64{5, 7})

			r.closeAll(dues)
			require.Zero(t, c.closes, "the late Close does not run")
			require.Equal(t, []uint64{5, 7}, r.conns["c"].ends, "the connection is still tracked in its new namespaces")
			ns.live = alive(5, 7)
			sweeps(r, 1)
			ns.live = alive(5)
			sweeps(r, 2)
			require.Equal(t, 1, c.closes, "its new endpoint's pod gone, it is closed")
		})
	}
}
