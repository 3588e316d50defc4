package labrun

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
)

// probeTimeout bounds one probe (connect and answer).
const probeTimeout = 2 * time.Second

// Probe opens one flow from the external host (source address from, a fresh
// source port) to vip:port over network ("tcp" or "udp") and returns the
// name the target answered with.
func (l *Lab) Probe(network string, from netip.Addr, vip netip.Addr, port int) (string, error) {
	return probe(l.NetNSPath("ext"), network, from, netip.AddrPortFrom(vip, uint16(port)))
}

func probe(nsPath, network string, from netip.Addr, to netip.AddrPort) (string, error) {
	return traffic.Ask(context.Background(), nsPath, network, from, to, probeTimeout)
}

// flowResult is the outcome of a batch of flows.
type flowResult struct {
	answers  map[string]int // target name -> flows
	failed   int
	firstErr error
}

func (r flowResult) String() string {
	var b strings.Builder
	total := r.failed
	for _, n := range r.answers {
		total += n
	}
	fmt.Fprintf(&b, "%d/%d answered", total-r.failed, total)
	names := sortedKeys(r.answers)
	if len(names) > 0 {
		b.WriteString(":")
	}
	for _, n := range names {
		b.WriteString(" " + n + "=" + strconv.Itoa(r.answers[n]))
	}
	if r.firstErr != nil {
		fmt.Fprintf(&b, " (%v)", r.firstErr)
	}
	return b.String()
}

// flows opens n flows concurrently.
func (l *Lab) flows(network string, from, vip netip.Addr, port, n int) flowResult {
	res := flowResult{answers: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name, err := l.Probe(network, from, vip, port)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.failed++
				if res.firstErr == nil {
					res.firstErr = err
				}
				return
			}
			res.answers[name]++
		}()
	}
	wg.Wait()
	return res
}
