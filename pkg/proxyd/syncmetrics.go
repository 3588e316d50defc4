package proxyd

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// syncMetrics are the provider's syncs under kube-proxy's names, with
// kube-proxy's meaning: the time a sync of the rules took (a histogram
// with kube-proxy's buckets, 1 ms doubling to 16 s), and when the rules
// were last synced without error.
type syncMetrics struct {
	duration prometheus.Histogram
	last     prometheus.Gauge
}

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
	}
}

// observe is the providers' SyncObserver.
func (m *syncMetrics) observe(took time.Duration, err error) {
	m.duration.Observe(took.Seconds())
	if err == nil {
		m.last.SetToCurrentTime()
	}
}

func (m *syncMetrics) Describe(ch chan<- *prometheus.Desc) {
	m.duration.Describe(ch)
	m.last.Describe(ch)
}

func (m *syncMetrics) Collect(ch chan<- prometheus.Metric) {
	m.duration.Collect(ch)
	m.last.Collect(ch)
}
