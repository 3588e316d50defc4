package feed

import (
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncMetrics are the provider's syncs under kube-proxy's names, with
// kube-proxy's meaning: the time a sync of the rules took (a histogram
// with kube-proxy's buckets, 1 ms doubling to 16 s), when the rules were
// last synced without error, and (Kubernetes source) the network
// programming latency: from the time a slice's writer saw the change
// (its trigger time) to the end of the first sync without error that
// started after the change was handed to the provider.
type syncMetrics struct {
	duration    prometheus.Histogram
	last        prometheus.Gauge
	programming prometheus.Histogram

	mu      sync.Mutex
	pending []pendingTrigger
}

// pendingTrigger is a change handed to the provider and not yet applied.
type pendingTrigger struct {
	trigger, handed time.Time
}

// maxPending bounds the changes waiting for a sync (the oldest go first).
const maxPending = 10000

func newSyncMetrics() *syncMetrics {
	return &syncMetrics{
		duration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kubeproxy_sync_proxy_rules_duration_seconds",
			Help:    "Time a sync of the service load balancer's rules took (its provider's SyncNow), in seconds.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 15),
		}),
		last: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "kubeproxy_sync_proxy_rules_last_timestamp_seconds",
			Help: "When the service load balancer's rules were last synced without error, in seconds since the epoch.",
		}),
		programming: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "kubeproxy_network_programming_duration_seconds",
			Help: "From the time an endpoint change was seen by the proxy that published it to its rules applied here, in seconds (Kubernetes source).",
			Buckets: slices.Concat(prometheus.LinearBuckets(0.25, 0.25, 2), prometheus.LinearBuckets(1, 1, 59),
				prometheus.LinearBuckets(60, 5, 12), prometheus.LinearBuckets(120, 30, 7)),
		}),
	}
}

// handed records the trigger times of changes handed to the provider now.
func (m *syncMetrics) handed(triggers []time.Time) {
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, t := range triggers {
		m.pending = append(m.pending, pendingTrigger{trigger: t, handed: now})
	}
	if over := len(m.pending) - maxPending; over > 0 {
		m.pending = slices.Delete(m.pending, 0, over)
	}
}

// observe is the providers' SyncObserver.
func (m *syncMetrics) observe(took time.Duration, err error) {
	m.duration.Observe(took.Seconds())
	if err != nil {
		return
	}
	m.last.SetToCurrentTime()
	now := time.Now()
	started := now.Add(-took)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = slices.DeleteFunc(m.pending, func(p pendingTrigger) bool {
		if p.handed.After(started) {
			return false
		}
		m.programming.Observe(now.Sub(p.trigger).Seconds())
		return true
	})
}

func (m *syncMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.last.Describe(ch)
	m.programming.Describe(ch)
}

func (m *syncMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.last.Collect(ch)
	m.programming.Collect(ch)
}
