package traffic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"
)

// ErrNotArrived is the outcome of an egress probe that the listener did
// not see arrive.
var ErrNotArrived = errors.New("did not arrive")

// EgressProber sends one egress datagram, a new flow from its own socket,
// every interval until Stop, each tagged with its sequence number, and
// judges each by whether an EgressListener saw it arrive: the path of a
// target's new flows out, one way (an answer would come back over the
// external host's routes, not the proxy's).
type EgressProber struct {
	f      EgressFlows
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	sent []time.Time // by sequence number; zero: the send failed
}

// StartEgressProber starts sending f's datagrams (f.Count is ignored, f.Tag
// prefixes the tags) every interval until Stop or ctx ends.
func StartEgressProber(ctx context.Context, f EgressFlows, interval time.Duration) (*EgressProber, error) {
	if !f.Src.IsValid() || !f.Dst.IsValid() || interval <= 0 {
		return nil, fmt.Errorf("egress prober: source, destination and a positive interval are required")
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &EgressProber{f: f, cancel: cancel, done: make(chan struct{})}
	go p.loop(ctx, interval)
	return p, nil
}

func (p *EgressProber) loop(ctx context.Context, interval time.Duration) {
	defer close(p.done)
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for seq := 0; ; seq++ {
		// Sent: when the datagram has left (switching to the sender's
		// namespace and making its socket can take long on a busy machine).
		var sent time.Time
		if sendEgress(ctx, p.f, p.tag(seq)) == nil {
			sent = time.Now()
		}
		p.mu.Lock()
		p.sent = append(p.sent, sent)
		p.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *EgressProber) tag(seq int) string { return p.f.Tag + "#" + strconv.Itoa(seq) }

// egressSyncTimeout bounds the wait of Series for the listener's readers.
const egressSyncTimeout = 5 * time.Second

// Series judges the datagrams sent settle or more before now (those after
// may still be on their way): OK with the interface they arrived on as
// Target, or ErrNotArrived. The listener's readers are caught up first
// (EgressListener.Sync), so that a reader held up on a busy machine does
// not make datagrams that arrived look lost; should that fail, the
// judgement is as of the readers' last read. A datagram that could not be
// sent is left out.
func (p *EgressProber) Series(l *EgressListener, settle time.Duration) Series {
	now, err := l.Sync(egressSyncTimeout)
	if err != nil {
		slog.Warn("egress probes judged without the listener caught up", "error", err)
	}
	arrived := map[string]string{}
	for _, a := range l.Arrivals() {
		arrived[a.Tag] = a.Iface
	}
	until := now.Add(-settle)
	p.mu.Lock()
	defer p.mu.Unlock()
	var s Series
	for seq, start := range p.sent {
		if start.IsZero() || start.After(until) {
			continue
		}
		pr := Probe{Start: start, Err: ErrNotArrived}
		if iface, ok := arrived[p.tag(seq)]; ok {
			pr.Target, pr.Err = iface, nil
		}
		s = append(s, pr)
	}
	return s
}

// Stop ends the sending and waits for it.
func (p *EgressProber) Stop() {
	p.cancel()
	<-p.done
}
