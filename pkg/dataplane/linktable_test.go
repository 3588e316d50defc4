package dataplane

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/testutil"
)

// eventLog collects a subscription's events.
type eventLog struct {
	mu      sync.Mutex
	deleted map[int]LinkEvent
	added   map[int]LinkEvent
	resync  int
	wg      sync.WaitGroup
}

func collect(ch <-chan LinkEvent) *eventLog {
	l := &eventLog{deleted: map[int]LinkEvent{}, added: map[int]LinkEvent{}}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		for ev := range ch {
			l.mu.Lock()
			switch ev.Type {
			case LinkDeleted:
				l.deleted[ev.Index] = ev
			case LinkAdded:
				l.added[ev.Index] = ev
			}
			if ev.Resync {
				l.resync++
			}
			l.mu.Unlock()
		}
	}()
	return l
}

func (l *eventLog) missingDeletes(idxs []int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, i := range idxs {
		if _, ok := l.deleted[i]; !ok {
			n++
		}
	}
	return n
}

func TestMonitorBurst(t *testing.T) {
	for _, overrun := range []bool{false, true} {
		name := "default buffer"
		if overrun {
			name = "overrun"
		}
		t.Run(name, func(t *testing.T) {
			ns := testutil.NewNetNS(t, "mon")
			opts := Options{}
			if overrun {
				// A tiny socket buffer, and a reader that cannot hand
				// over more than one update while the link table is held
				// below: the socket overruns for sure, and the link table
				// must re-subscribe and re-sync, synthesising the deletes
				// it missed.
				opts.ReceiveBuffer = 2048
				old := linkChanBuffer
				linkChanBuffer = 1
				t.Cleanup(func() { linkChanBuffer = old })
			}
			dp := newDP(t, ns, opts)
			ch, cancel := dp.Subscribe()
			log := collect(ch)
			defer func() {
				cancel()
				log.wg.Wait()
			}()
			// A subscriber that never reads must not hold anyone up.
			_, cancelStuck := dp.Subscribe()
			defer cancelStuck()

			const n = 500
			var add, del strings.Builder
			// All in link group 7, so that most can go in one
			// `ip link del group` (one RCU grace period instead of one
			// per link: deleting 500 veths one by one takes the kernel
			// about 8 s); the first 50 go one by one, in a batch.
			for i := range n {
				fmt.Fprintf(&add, "link add bv%d group 7 type veth peer name bw%d group 7\n", i, i)
				if i < 50 {
					fmt.Fprintf(&del, "link del bv%d\n", i)
				}
			}
			dir := t.TempDir()
			addFile, delFile := filepath.Join(dir, "add"), filepath.Join(dir, "del")
			require.NoError(t, os.WriteFile(addFile, []byte(add.String()), 0o644))
			require.NoError(t, os.WriteFile(delFile, []byte(del.String()), 0o644))

			ns.MustExec(t, "ip", "-batch", addFile)
			links, err := handle(t, ns).LinkList()
			require.NoError(t, err)
			var idxs []int
			for _, l := range links {
				if strings.HasPrefix(l.Attrs().Name, "bv") || strings.HasPrefix(l.Attrs().Name, "bw") {
					idxs = append(idxs, l.Attrs().Index)
				}
			}
			require.Len(t, idxs, 2*n)
			require.Eventually(t, func() bool {
				known := 0
				for _, i := range idxs {
					if _, ok := dp.Link(i); ok {
						known++
					}
				}
				return known == 2*n
			}, 30*time.Second, 10*time.Millisecond, "the link table sees every new link")

			if overrun {
				dp.pen.mu.Lock() // stalls the link table in its internal subscriber
			}
			ns.MustExec(t, "ip", "-batch", delFile)
			ns.MustExec(t, "ip", "link", "del", "group", "7")
			if overrun {
				dp.pen.mu.Unlock()
			}
			require.Eventually(t, func() bool { return log.missingDeletes(idxs) == 0 }, 30*time.Second, 10*time.Millisecond,
				"every delete is delivered")
			st := dp.Stats()
			log.mu.Lock()
			defer log.mu.Unlock()
			synthesized := 0
			for _, i := range idxs {
				ev := log.deleted[i]
				require.Equal(t, "veth", ev.Kind, "event %+v", ev)
				require.True(t, strings.HasPrefix(ev.Name, "bv") || strings.HasPrefix(ev.Name, "bw"), "event %+v", ev)
				if ev.Resync {
					synthesized++
				}
			}
			t.Logf("%d links created and deleted, every delete delivered (%d synthesised by a re-sync); %d re-subscriptions",
				2*n, synthesized, st.Resubscribes)
			if overrun {
				require.Positive(t, st.Resubscribes, "the socket overran")
				require.Positive(t, synthesized, "deletes lost in the overrun come from the re-sync")
			}
			// The link table's view agrees with the kernel.
			for _, l := range dp.Links() {
				require.False(t, strings.HasPrefix(l.Name, "bv") || strings.HasPrefix(l.Name, "bw"), "stale link %+v", l)
			}
		})
	}
}

func TestSubscribeClose(t *testing.T) {
	ns := testutil.NewNetNS(t, "sc")
	dp, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t)})
	require.NoError(t, err)
	ch, cancel := dp.Subscribe()
	ns.MustExec(t, "ip", "link", "add", "x0", "type", "veth", "peer", "name", "x1")
	timeout := time.After(time.Minute)
	for found := false; !found; {
		select {
		case ev := <-ch:
			if ev.Type == LinkAdded && (ev.Name == "x0" || ev.Name == "x1") {
				require.Equal(t, "veth", ev.Kind)
				require.Positive(t, ev.Index)
				found = true
			}
		case <-timeout:
			t.Fatal("no event")
		}
	}
	require.NoError(t, dp.Close())
	// Close ends subscriptions: the channel drains and closes.
	for range ch {
	}
	cancel() // harmless after Close
	ch2, cancel2 := dp.Subscribe()
	_, open := <-ch2
	require.False(t, open, "subscribing after Close gives a closed channel")
	cancel2()
	require.NoError(t, dp.Close(), "a second Close is fine")
}

// The link table answers by name too, and follows renames and deletes:
// the link matcher matches connections by name on it.
func TestLinkByName(t *testing.T) {
	ns := testutil.NewNetNS(t, "lbn")
	dp, err := New(ctx, Options{NetNS: ns.Handle, Logger: testLogger(t)})
	require.NoError(t, err)
	defer func() { require.NoError(t, dp.Close()) }()
	ns.MustExec(t, "ip", "link", "add", "n0", "type", "veth", "peer", "name", "n1")
	require.Eventually(t, func() bool { _, ok := dp.LinkByName("n0"); return ok }, time.Minute, 5*time.Millisecond)
	l, _ := dp.LinkByName("n0")
	byIndex, ok := dp.Link(l.Index)
	require.True(t, ok)
	require.Equal(t, l, byIndex)

	ns.MustExec(t, "ip", "link", "set", "n0", "name", "m0")
	require.Eventually(t, func() bool { _, ok := dp.LinkByName("m0"); return ok }, time.Minute, 5*time.Millisecond)
	_, ok = dp.LinkByName("n0")
	require.False(t, ok, "the old name is gone")
	renamed, _ := dp.LinkByName("m0")
	require.Equal(t, l.Index, renamed.Index)

	ns.MustExec(t, "ip", "link", "del", "m0")
	require.Eventually(t, func() bool { _, ok := dp.LinkByName("m0"); return !ok }, time.Minute, 5*time.Millisecond)
	_, ok = dp.LinkByName("n1")
	require.False(t, ok, "the peer went with it")
}

// A listing of the links that fails (interrupted dumps while links churn,
// say) does not leave the link table empty as if synced: the link table
// subscribes and lists again, and the Dataplane starts once its table
// holds the namespace's links (the link matcher matches connections
// on it, and the routes leave out the nexthops of links it says are gone).
func TestLinkTableNotSyncedFromAFailedListing(t *testing.T) {
	ns := testutil.NewNetNS(t, "lfail")
	idx := vethPair(t, ns, "w0", nil, "w1")
	var calls atomic.Int32
	old := listLinks
	listLinks = func(h *netlink.Handle) ([]netlink.Link, error) {
		if calls.Add(1) <= 6 { // more than one resync's tries
			return nil, errors.New("injected: dump interrupted")
		}
		return old(h)
	}
	t.Cleanup(func() { listLinks = old })

	dp := newDP(t, ns, Options{})
	l, ok := dp.LinkByName("w0")
	require.True(t, ok, "the table holds the links that were there before the start")
	require.Equal(t, idx, l.Index)
	_, ok = dp.Link(1)
	require.True(t, ok, "and the loopback")
	require.Greater(t, calls.Load(), int32(6), "listed again after the failures")
}
