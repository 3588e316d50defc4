package ipam

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

const metricsNamespace = "causeway_ipam"

// storeStats are the writer's commit metrics.
type storeStats struct {
	commits *prometheus.CounterVec
	ops     prometheus.Counter
	batch   prometheus.Histogram
	latency prometheus.Histogram
}

func newStoreStats() *storeStats {
	return &storeStats{
		commits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "store_commits_total",
			Help: "Store transactions attempted, by result (ok, error).",
		}, []string{"result"}),
		ops: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "store_committed_changes_total",
			Help: "Changes (puts and deletes) committed to the store.",
		}),
		batch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "store_commit_batch_size",
			Help:    "Changes per store transaction (group commit).",
			Buckets: prometheus.ExponentialBuckets(1, 4, 7),
		}),
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "store_commit_duration_seconds",
			Help:    "Duration of store transactions, fsync included.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 8),
		}),
	}
}

func (s *storeStats) observe(n int, d time.Duration, err error) {
	if err != nil {
		s.commits.WithLabelValues("error").Inc()
		return
	}
	s.commits.WithLabelValues("ok").Inc()
	s.ops.Add(float64(n))
	s.batch.Observe(float64(n))
	s.latency.Observe(d.Seconds())
}

var (
	descChildren = prometheus.NewDesc(metricsNamespace+"_allocations",
		"Addresses allocated (children) per node subnet.",
		[]string{"trench", "family", "conduit", "node"}, nil)
	descNodes = prometheus.NewDesc(metricsNamespace+"_nodes",
		"Node subnets allocated per conduit.",
		[]string{"trench", "family", "conduit"}, nil)
	descConduits = prometheus.NewDesc(metricsNamespace+"_conduits",
		"Conduit subnets allocated per trench.",
		[]string{"trench", "family"}, nil)
	descDraining = prometheus.NewDesc(metricsNamespace+"_conduits_draining",
		"Conduit subnets kept for their allocations after the configuration dropped them (no new allocations).",
		[]string{"trench", "family"}, nil)
)

// Describe implements prometheus.Collector.
func (e *Engine) Describe(ch chan<- *prometheus.Desc) {
	ch <- descChildren
	ch <- descNodes
	ch <- descConduits
	ch <- descDraining
	e.stats.commits.Describe(ch)
	e.stats.ops.Describe(ch)
	e.stats.batch.Describe(ch)
	e.stats.latency.Describe(ch)
	e.refusals.Describe(ch)
}

// Collect implements prometheus.Collector: the allocation gauges are read
// from the in-memory index at scrape time, so the hot path pays nothing.
// Values are gathered under the locks and sent after.
func (e *Engine) Collect(ch chan<- prometheus.Metric) {
	var out []prometheus.Metric
	for _, t := range e.trenches {
		fam := t.family.String()
		conduits := t.conduitList()
		out = append(out, prometheus.MustNewConstMetric(descConduits, prometheus.GaugeValue, float64(len(conduits)), t.name, fam),
			prometheus.MustNewConstMetric(descDraining, prometheus.GaugeValue, float64(t.draining()), t.name, fam))
		for _, c := range conduits {
			c.mu.RLock()
			out = append(out, prometheus.MustNewConstMetric(descNodes, prometheus.GaugeValue, float64(len(c.nodes)), t.name, fam, c.name))
			for _, n := range c.nodes {
				n.mu.RLock()
				k := len(n.children)
				n.mu.RUnlock()
				out = append(out, prometheus.MustNewConstMetric(descChildren, prometheus.GaugeValue, float64(k), t.name, fam, c.name, n.name))
			}
			c.mu.RUnlock()
		}
	}
	for _, m := range out {
		ch <- m
	}
	e.stats.commits.Collect(ch)
	e.stats.ops.Collect(ch)
	e.stats.batch.Collect(ch)
	e.stats.latency.Collect(ch)
	e.refusals.Collect(ch)
}

var _ prometheus.Collector = (*Engine)(nil)

// MetricsHandler serves the metrics of g in the Prometheus exposition format.
func MetricsHandler(g prometheus.Gatherer) http.Handler {
	return promhttp.HandlerFor(g, promhttp.HandlerOpts{})
}
