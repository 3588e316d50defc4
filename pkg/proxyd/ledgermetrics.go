package proxyd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-net/causeway/pkg/nsm/clientproof"
)

// ledgerMetrics are the metrics of the ledger of target tokens
// (clientproof), read from its stats at scrape time.
type ledgerMetrics struct {
	stats               func() clientproof.LedgerStats
	tokens, max, unremb *prometheus.Desc
}

func newLedgerMetrics(stats func() clientproof.LedgerStats) ledgerMetrics {
	desc := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("causeway_proxy_token_ledger_"+name, help, nil, nil)
	}
	return ledgerMetrics{stats: stats,
		tokens: desc("tokens", "Target tokens remembered, each held to the connection it was first presented for until it expires."),
		max:    desc("max_tokens", "The most target tokens the ledger remembers."),
		unremb: desc("unremembered_total", "Target tokens proved while the ledger was full and not remembered: a copy of each could be replayed to this proxy until it expired."),
	}
}

// Describe implements prometheus.Collector.
func (m ledgerMetrics) Describe(ch chan<- *prometheus.Desc) {
	ch <- m.tokens
	ch <- m.max
	ch <- m.unremb
}

// Collect implements prometheus.Collector.
func (m ledgerMetrics) Collect(ch chan<- prometheus.Metric) {
	s := m.stats()
	ch <- prometheus.MustNewConstMetric(m.tokens, prometheus.GaugeValue, float64(s.Tokens))
	ch <- prometheus.MustNewConstMetric(m.max, prometheus.GaugeValue, float64(s.Max))
	ch <- prometheus.MustNewConstMetric(m.unremb, prometheus.CounterValue, float64(s.Dropped))
}
