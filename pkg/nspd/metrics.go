package nspd

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/causeway-net/causeway/pkg/nspd/nspserver"
)

// metrics holds the server's Prometheus metrics and serves them in the text
// exposition format.
type metrics struct {
	registry          *prometheus.Registry
	applied, rejected prometheus.Counter
}

func newMetrics(nsp *nspserver.Server) *metrics {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "causeway_nsp_config_reloads_total",
		Help: "New versions of the configuration file, by result (applied or rejected).",
	}, []string{"result"})
	m := &metrics{
		registry: prometheus.NewRegistry(),
		applied:  reloads.WithLabelValues("applied"),
		rejected: reloads.WithLabelValues("rejected"),
	}
	m.registry.MustRegister(collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), reloads)
	for _, kind := range []string{"vip", "conduit"} {
		m.registry.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "causeway_nsp_watch_streams",
			Help:        "Open watch streams, by kind.",
			ConstLabels: prometheus.Labels{"kind": kind},
		}, func() float64 { return float64(nsp.Watchers()[kind]) }))
	}
	return m
}

// ServeHTTP serves every metric in the Prometheus exposition format.
func (m *metrics) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}
