package nexthopcheck

import (
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// guard bounds the waits for something that must happen at all; the
// figures are far below it.
const guard = 20 * time.Second

// watcher is a Checker under test and the changes it reported.
type watcher struct {
	*Checker
	changes chan Change
}

func startChecker(t *testing.T, b *bed, s Settings) *watcher {
	t.Helper()
	w := &watcher{changes: make(chan Change, 4096)}
	c, err := New(s, WithNetNS(b.proxy.Handle), WithOnChange(func(cs []Change) {
		for _, ch := range cs {
			w.changes <- ch
		}
	}))
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, c.Close()) })
	w.Checker = c
	return w
}

// next returns the next change reported.
func (w *watcher) next(t *testing.T) Change {
	t.Helper()
	timer := time.NewTimer(guard)
	defer timer.Stop()
	select {
	case ch := <-w.changes:
		return ch
	case <-timer.C:
		t.Fatalf("no change within %v: %+v", guard, w.Statuses())
		return Change{}
	}
}

// waitChange returns the next change, which must be p's.
func (w *watcher) waitChange(t *testing.T, p Peer) Change {
	t.Helper()
	ch := w.next(t)
	if ch.Peer != p {
		st, _ := w.Status(ch.Peer)
		t.Fatalf("a change of another peer: %+v; its status: %+v", ch, st)
	}
	return ch
}

// waitState returns p's next change to state, skipping (and logging) the
// changes before it: another peer's, or p's own to another state. For a
// test about one peer on a loaded machine, where a peer it does not touch
// may be judged down for a while (its answers late beyond the bound).
func (w *watcher) waitState(t *testing.T, p Peer, state State) Change {
	t.Helper()
	for {
		ch := w.next(t)
		if ch.Peer == p && ch.State == state {
			return ch
		}
		st, _ := w.Status(ch.Peer)
		t.Logf("skipped, waiting for %s to be %s: a change %+v; its status: %+v", p, state, ch, st)
	}
}

// skipQueued logs and drops the changes reported so far.
func (w *watcher) skipQueued(t *testing.T) {
	t.Helper()
	for {
		select {
		case ch := <-w.changes:
			t.Logf("skipped: an earlier change %+v", ch)
		default:
			return
		}
	}
}

// waitChanges returns the next change of each of peers (in any order);
// another peer's change fails t.
func (w *watcher) waitChanges(t *testing.T, peers ...Peer) map[Peer]Change {
	t.Helper()
	got := map[Peer]Change{}
	for len(got) < len(peers) {
		ch := w.next(t)
		require.Contains(t, peers, ch.Peer, "a change of another peer: %+v", ch)
		got[ch.Peer] = ch
	}
	return got
}

// noChange fails t if a change was reported.
func (w *watcher) noChange(t *testing.T) {
	t.Helper()
	select {
	case ch := <-w.changes:
		t.Fatalf("unexpected change %+v", ch)
	default:
	}
}

// waitAnswered waits until every peer has answered n probes.
func (w *watcher) waitAnswered(t *testing.T, n uint64) {
	t.Helper()
	require.Eventually(t, func() bool {
		for _, s := range w.Statuses() {
			if s.Answered < n {
				return false
			}
		}
		return true
	}, guard, 10*time.Millisecond, "every peer answers")
}

// quantile is the q-quantile of ds (nearest rank), ds sorted.
func quantile(ds []time.Duration, q float64) time.Duration {
	return ds[int(math.Ceil(q*float64(len(ds))))-1]
}

// sorted is a sorted copy of ds.
func sorted(ds []time.Duration) []time.Duration {
	ds = slices.Clone(ds)
	slices.Sort(ds)
	return ds
}
