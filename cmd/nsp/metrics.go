package main

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"

	"github.com/causeway-net/causeway/pkg/config/nspserver"
)

// metrics holds the server's Prometheus metrics and serves them in the text
// exposition format. (promhttp would need a module that go.mod lacks.)
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

// ServeHTTP writes every metric in the Prometheus text format.
func (m *metrics) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	families, err := m.registry.Gather()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	format := expfmt.NewFormat(expfmt.TypeTextPlain)
	w.Header().Set("Content-Type", string(format))
	enc := expfmt.NewEncoder(w, format)
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return
		}
	}
}
