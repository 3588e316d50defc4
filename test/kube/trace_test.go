package kube_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// backlogDrops sums the packets the kernel dropped because a CPU's input
// backlog was full (the second column of /proc/net/softnet_stat, one line
// per CPU). Every veth of every namespace on the machine passes a packet
// through that backlog, so a drop there hits every trench at once.
func backlogDrops() (uint64, error) {
	data, err := os.ReadFile("/proc/net/softnet_stat")
	if err != nil {
		return 0, fmt.Errorf("backlog drops: %w", err)
	}
	var sum uint64
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 2 {
			return 0, fmt.Errorf("backlog drops: line %q", line)
		}
		n, err := strconv.ParseUint(fields[1], 16, 64)
		if err != nil {
			return 0, fmt.Errorf("backlog drops: %w", err)
		}
		sum += n
	}
	return sum, nil
}

// backlogDrop is a rise of backlogDrops seen at a sample.
type backlogDrop struct {
	at      time.Time
	dropped uint64
}

// watchBacklog samples backlogDrops every 100 ms until the returned
// function stops it (at the latest when t ends) and logs each rise with
// its time, to be set beside the lost probes' (lostProbes); it returns the
// packets dropped in all.
func watchBacklog(t *testing.T, while string) func() uint64 {
	t.Helper()
	first, err := backlogDrops()
	if err != nil {
		t.Fatal(err)
	}
	var rises []backlogDrop
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		last := first
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case now := <-tick.C:
				if n, err := backlogDrops(); err == nil && n > last {
					rises = append(rises, backlogDrop{at: now, dropped: n - last})
					last = n
				}
			}
		}
	}()
	stopped := false
	stop := func() uint64 {
		if stopped {
			return 0
		}
		stopped = true
		close(done)
		wg.Wait()
		var sum uint64
		var out []string
		for _, r := range rises {
			sum += r.dropped
			out = append(out, fmt.Sprintf("%s +%d", r.at.UTC().Format("15:04:05.0"), r.dropped))
		}
		if sum != 0 {
			t.Logf("the kernel's input backlogs dropped %d packets while %s: %s", sum, while, strings.Join(out, ", "))
		}
		return sum
	}
	t.Cleanup(func() { stop() })
	return stop
}

// logPodEvents logs the events of the pods of namespace ns since since,
// each with its time, reason and pod (when they began and stopped, to be
// set beside the lost probes').
func (c *cluster) logPodEvents(ctx context.Context, t *testing.T, ns string, since time.Time) {
	t.Helper()
	events, err := c.client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.kind=Pod"})
	if err != nil {
		t.Logf("events of %s: %v", ns, err)
		return
	}
	var out []string
	for _, e := range events.Items {
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.Before(since) {
			continue
		}
		out = append(out, fmt.Sprintf("%s %s %s", at.UTC().Format("15:04:05"), e.Reason, e.InvolvedObject.Name))
	}
	slices.Sort(out)
	t.Logf("pod events of %s since %s: %s", ns, since.UTC().Format("15:04:05"), strings.Join(out, "; "))
}
