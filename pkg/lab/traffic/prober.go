package traffic

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"
)

// ProbeConfig describes a continuous prober.
type ProbeConfig struct {
	// NetNSPath is the namespace the probes start in (current when empty).
	NetNSPath string
	// Network is "tcp" or "udp".
	Network string
	// Addr is the destination, typically VIP:echo port.
	Addr netip.AddrPort
	// Local, when valid, is the source address.
	Local netip.Addr
	// Interval between the starts of two probes (default 10ms).
	Interval time.Duration
	// Timeout bounds each probe (default 500ms). A probe is one new flow:
	// a connection, or one datagram from a new socket.
	Timeout time.Duration
}

// Probe is the outcome of one probe.
type Probe struct {
	// Start is when the probe started; probes are ordered by it.
	Start time.Time
	// Took is how long the probe ran.
	Took time.Duration
	// Target is the name that answered (empty on failure).
	Target string
	// Err is why the probe failed (nil on success).
	Err error
}

// OK reports whether a target answered.
func (p Probe) OK() bool { return p.Err == nil }

// Prober starts a new short flow every Interval until Stop, each in its own
// goroutine so that a black-holed probe does not delay the next ones, and
// records the outcomes.
type Prober struct {
	cfg    ProbeConfig
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	probes []Probe
	marks  map[string]time.Time
}

// StartProber validates cfg and starts probing until Stop or ctx ends.
func StartProber(ctx context.Context, cfg ProbeConfig) (*Prober, error) {
	if cfg.Network != "tcp" && cfg.Network != "udp" {
		return nil, fmt.Errorf("prober: network %q is neither tcp nor udp", cfg.Network)
	}
	if !cfg.Addr.IsValid() {
		return nil, fmt.Errorf("prober: no address")
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 10 * time.Millisecond
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 500 * time.Millisecond
	}
	ctx, cancel := context.WithCancel(ctx)
	p := &Prober{cfg: cfg, cancel: cancel, marks: map[string]time.Time{}}
	p.wg.Add(1)
	go p.loop(ctx)
	return p, nil
}

func (p *Prober) loop(ctx context.Context) {
	defer p.wg.Done()
	tick := time.NewTicker(p.cfg.Interval)
	defer tick.Stop()
	for {
		p.wg.Add(1)
		go p.probe(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

func (p *Prober) probe(ctx context.Context) {
	defer p.wg.Done()
	start := time.Now()
	name, err := Ask(ctx, p.cfg.NetNSPath, p.cfg.Network, p.cfg.Local, p.cfg.Addr, p.cfg.Timeout)
	if ctx.Err() != nil {
		// Stopped mid-flight: the outcome says nothing about the path.
		return
	}
	p.mu.Lock()
	p.probes = append(p.probes, Probe{Start: start, Took: time.Since(start), Target: name, Err: err})
	p.mu.Unlock()
}

// Mark records now as the time of the named event (e.g. "lb-a killed") and
// returns it.
func (p *Prober) Mark(event string) time.Time {
	now := time.Now()
	p.mu.Lock()
	p.marks[event] = now
	p.mu.Unlock()
	return now
}

// MarkAt returns the time recorded for event.
func (p *Prober) MarkAt(event string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	at, ok := p.marks[event]
	return at, ok
}

// Series is a snapshot of the finished probes so far, ordered by start.
func (p *Prober) Series() Series {
	p.mu.Lock()
	s := slices.Clone(p.probes)
	p.mu.Unlock()
	slices.SortFunc(s, func(a, b Probe) int { return a.Start.Compare(b.Start) })
	return s
}

// Stop ends probing, waits for the probes in flight and returns the series.
func (p *Prober) Stop() Series {
	p.cancel()
	p.wg.Wait()
	return p.Series()
}
