package labrun

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"github.com/ti-mo/conntrack"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

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

// udpTracked reports whether the proxy's conntrack table, where the
// service load balancer makes its NAT decisions, still holds a UDP flow
// from from to to.
func (l *Lab) udpTracked(to netip.AddrPort) traffic.Tracked {
	return func(from netip.AddrPort) (bool, error) {
		ns, err := netns.GetFromPath(l.NetNSPath("proxy"))
		if err != nil {
			return false, fmt.Errorf("proxy namespace: %w", err)
		}
		defer ns.Close()
		c, err := conntrack.Dial(&netlink.Config{NetNS: int(ns)})
		if err != nil {
			return false, err
		}
		defer c.Close()
		_, err = c.Get(conntrack.NewFlow(unix.IPPROTO_UDP, 0, from.Addr(), to.Addr(), from.Port(), to.Port(), 0, 0))
		if errors.Is(err, unix.ENOENT) {
			return false, nil
		}
		return err == nil, err
	}
}
