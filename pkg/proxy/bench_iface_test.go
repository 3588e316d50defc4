package proxy

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/dataplane"
)

// portsDataplane tells, after every Apply, how many ports it was given.
type portsDataplane struct{ ports chan int }

func (d *portsDataplane) Apply(s dataplane.State) error {
	select {
	case d.ports <- len(s.Ports):
	default: // nobody waits: a coalesced Apply
	}
	return nil
}

// waitPorts waits until an Apply carries n ports.
func (d *portsDataplane) waitPorts(b *testing.B, n int) {
	deadline := time.After(time.Minute)
	for {
		select {
		case got := <-d.ports:
			if got == n {
				return
			}
		case <-deadline:
			b.Fatalf("no Apply with %d ports", n)
		}
	}
}

// ifaceEventTime returns the median time from one more target's interface
// event to the Apply that carries its port, on a proxy that serves n
// targets (and two LBs), over trials; the port is removed again between
// trials, untimed.
func ifaceEventTime(b *testing.B, n, trials int) time.Duration {
	dp := &portsDataplane{ports: make(chan int, 1)}
	p, err := New(context.Background(), Config{
		Conduit: "conduit-a", Trench: "trench-a", Node: "bench",
		IPAM: serveIPAM(b, &fakeIPAM{nodes: map[string]*fakeNode{}, wide: true}), Dataplane: dp, Logger: testLogger(),
	})
	require.NoError(b, err)
	defer func() { require.NoError(b, p.Close(context.Background())) }()
	for i := range 2 {
		benchLink(b, p, 10+i, lbConn(fmt.Sprintf("lb-%d", i)), LBConn)
	}
	for i := range n + 1 {
		benchLink(b, p, 100+i, targetConn(fmt.Sprintf("target-%d", i)), TargetConn)
	}
	extra := 100 + n
	benchUnlink(p, extra, targetConn(fmt.Sprintf("target-%d", n)), TargetConn)
	dp.waitPorts(b, n+2)
	times := make([]time.Duration, 0, trials)
	for range trials {
		conn := targetConn(fmt.Sprintf("target-%d", n))
		t0 := time.Now()
		benchRelink(p, extra, conn, TargetConn)
		dp.waitPorts(b, n+3)
		times = append(times, time.Since(t0))
		benchUnlink(p, extra, conn, TargetConn)
		dp.waitPorts(b, n+2)
	}
	slices.Sort(times)
	return times[len(times)/2]
}

// BenchmarkInterfaceEvent measures what one target's interface costs the
// proxy (the event, the desired state, the hand-over to the dataplane, with
// a dataplane that does nothing) at 100 and at 1,000 targets: the time to
// add a target should not depend on how many there are.
func BenchmarkInterfaceEvent(b *testing.B) {
	trials := max(b.N, 300)
	t100 := ifaceEventTime(b, 100, trials)
	t1000 := ifaceEventTime(b, 1000, trials)
	b.ReportMetric(float64(t100.Nanoseconds())/1e3, "us-at-100")
	b.ReportMetric(float64(t1000.Nanoseconds())/1e3, "us-at-1000")
	b.ReportMetric(float64(t1000)/float64(t100), "ratio-1000/100")
	b.Logf("FIGURE: one target's interface event to its Apply (median): %v at 100 targets, %v at 1000 (ratio %.2f)",
		t100, t1000, float64(t1000)/float64(t100))
}
