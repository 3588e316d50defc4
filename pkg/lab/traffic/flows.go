package traffic

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Flows describes a batch of flows from a namespace to one address.
type Flows struct {
	// NetNSPath is the namespace the flows start in (current when empty).
	NetNSPath string
	// Addr is the destination, typically VIP:echo port.
	Addr netip.AddrPort
	// Local, when valid, is the source address.
	Local netip.Addr
	// Count is the number of flows (connections or UDP flows).
	Count int
	// Parallel is how many flows are in progress at once (default 8).
	Parallel int
	// Timeout bounds each flow, or each UDP attempt (default 2s).
	Timeout time.Duration
	// Attempts is how many datagrams a UDP flow sends, over the same source
	// port, before it counts as lost (default 1). TCP ignores it: the
	// kernel retransmits a SYN on its own.
	Attempts int
}

func (f Flows) withDefaults() (Flows, error) {
	if !f.Addr.IsValid() || f.Count <= 0 {
		return f, fmt.Errorf("flows: an address and a positive count are required")
	}
	if f.Parallel <= 0 {
		f.Parallel = 8
	}
	if f.Timeout <= 0 {
		f.Timeout = 2 * time.Second
	}
	if f.Attempts <= 0 {
		f.Attempts = 1
	}
	return f, nil
}

// TCP opens f.Count connections, each a new one from a new source port,
// reads the answering target's name and tallies it. Failed connections are
// counted in the Tally; the error is for a bad description or a context end.
func TCP(ctx context.Context, f Flows) (Tally, error) {
	f, err := f.withDefaults()
	if err != nil {
		return Tally{}, err
	}
	return run(ctx, f, func(ctx context.Context) (string, error) {
		return askTCP(ctx, f.NetNSPath, f.Local, f.Addr, f.Timeout)
	})
}

// UDP runs f.Count flows, each from its own socket; every socket stays open
// until the batch ends so that the flows have distinct source ports. A flow
// sends a datagram and reads the answering target's name; one without an
// answer after f.Attempts tries counts as lost (Tally.Errors).
func UDP(ctx context.Context, f Flows) (Tally, error) {
	f, err := f.withDefaults()
	if err != nil {
		return Tally{}, err
	}
	var mu sync.Mutex
	var open []net.Conn
	defer func() {
		for _, c := range open {
			_ = c.Close()
		}
	}()
	return run(ctx, f, func(ctx context.Context) (string, error) {
		c, err := dialIn(ctx, f.NetNSPath, "udp", f.Local, f.Addr, f.Timeout)
		if err != nil {
			return "", err
		}
		mu.Lock()
		open = append(open, c)
		mu.Unlock()
		return askUDP(c, f.Addr, f.Attempts, f.Timeout)
	})
}

// run calls flow f.Count times with f.Parallel workers and tallies.
func run(ctx context.Context, f Flows, flow func(context.Context) (string, error)) (Tally, error) {
	jobs := make(chan struct{})
	var mu sync.Mutex
	t := newTally()
	var wg sync.WaitGroup
	for range min(f.Parallel, f.Count) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				name, err := flow(ctx)
				mu.Lock()
				t.add(name, err)
				mu.Unlock()
			}
		}()
	}
	var err error
feed:
	for range f.Count {
		select {
		case jobs <- struct{}{}:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(jobs)
	wg.Wait()
	return t, err
}
