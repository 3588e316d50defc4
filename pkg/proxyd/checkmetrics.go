package proxyd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// checkMetrics are a datapath check's metrics, one series per peer (an LB
// nexthop or a target), read from its Statuses at scrape time.
type checkMetrics struct {
	c                                 *nexthopcheck.Checker
	up, change, sent, lost, downs, dr *prometheus.Desc
}

// newCheckMetrics names the metrics of c after kind ("nexthop" or
// "target"); what says what a down peer means.
func newCheckMetrics(c *nexthopcheck.Checker, kind, what string) checkMetrics {
	desc := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("causeway_proxy_"+kind+"_"+name, help, labels, nil)
	}
	return checkMetrics{c: c,
		up:     desc("up", "1 if the "+kind+" answers its datapath probes, 0 if it was found down ("+what+"), -1 if unchecked.", kind),
		change: desc("last_change_timestamp_seconds", "Time of the "+kind+"'s last change of state (or of its first watch).", kind),
		sent:   desc("probes_sent_total", "Echo probes sent to the "+kind+".", kind),
		lost:   desc("probes_lost_total", "Echo probes to the "+kind+" not answered within the interval.", kind),
		downs:  desc("downs_total", "Times the "+kind+" was found down.", kind),
		dr:     desc("check_dropped_total", "Echo answers dropped by the probe sockets' full receive buffers (each one a probe lost by us, not by the "+kind+")."),
	}
}

// Describe implements prometheus.Collector.
func (m checkMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{m.up, m.change, m.sent, m.lost, m.downs, m.dr} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m checkMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.c.Statuses() {
		up := map[nexthopcheck.State]float64{nexthopcheck.Up: 1, nexthopcheck.Down: 0, nexthopcheck.Unchecked: -1}[s.State]
		ch <- prometheus.MustNewConstMetric(m.up, prometheus.GaugeValue, up, s.Addr)
		ch <- prometheus.MustNewConstMetric(m.change, prometheus.GaugeValue, float64(s.Since.UnixNano())/1e9, s.Addr)
		ch <- prometheus.MustNewConstMetric(m.sent, prometheus.CounterValue, float64(s.Sent), s.Addr)
		ch <- prometheus.MustNewConstMetric(m.lost, prometheus.CounterValue, float64(s.Lost), s.Addr)
		ch <- prometheus.MustNewConstMetric(m.downs, prometheus.CounterValue, float64(s.Downs), s.Addr)
	}
	ch <- prometheus.MustNewConstMetric(m.dr, prometheus.CounterValue, float64(m.c.Dropped()))
}
