package kube_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/causeway-net/causeway/pkg/lab/traffic"
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

// traceGap logs, for a cut longer than a second on the way of what,
// when it began and ended, the events of the pods' namespace since since,
// and the lines that container of each of pods logged around the cut in
// its run before the restart and in its run now: what each did while the
// data path was cut (the figures alone do not say).
func (c *cluster) traceGap(ctx context.Context, t *testing.T, what string, g traffic.Gap, pods []*corev1.Pod, container string, since time.Time) {
	t.Helper()
	if g.Len() <= time.Second {
		return
	}
	t.Logf("%s: a cut of %s, %s to %s (UTC)", what, g.Len().Round(time.Millisecond),
		g.Start.UTC().Format("15:04:05.000"), g.End.UTC().Format("15:04:05.000"))
	if len(pods) == 0 {
		return
	}
	c.logPodEvents(ctx, t, pods[0].Namespace, since)
	for _, pod := range pods {
		c.logAround(ctx, t, pod, container, g.Start.Add(-5*time.Second), g.End.Add(5*time.Second))
	}
}

// logAround logs the lines that container of pod logged from from to to,
// in its run before the last restart and in its run now.
func (c *cluster) logAround(ctx context.Context, t *testing.T, pod *corev1.Pod, container string, from, to time.Time) {
	t.Helper()
	for _, previous := range []bool{true, false} {
		b, err := c.client.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name,
			&corev1.PodLogOptions{Container: container, Previous: previous}).DoRaw(ctx)
		if err != nil {
			t.Logf("%s logs of %s (previous run %v): %v", container, pod.Name, previous, err)
			continue
		}
		var lines []string
		for _, line := range strings.Split(string(b), "\n") {
			var l struct{ Time time.Time }
			if json.Unmarshal([]byte(line), &l) == nil && !l.Time.Before(from) && !l.Time.After(to) {
				lines = append(lines, line)
			}
		}
		t.Logf("%s of %s from %s to %s (previous run %v), %d lines:\n%s", container, pod.Name,
			from.UTC().Format("15:04:05"), to.UTC().Format("15:04:05"), previous, len(lines), strings.Join(lines, "\n"))
	}
}
