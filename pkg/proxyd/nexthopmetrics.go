package proxyd

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/causeway-net/causeway/pkg/nexthopcheck"
)

// nexthopMetrics are the datapath check's metrics, one series per LB
// nexthop, read from its Statuses at scrape time.
type nexthopMetrics struct {
	c *nexthopcheck.Checker
}

var (
	hopLabels  = []string{"nexthop"}
	hopUp      = prometheus.NewDesc("causeway_proxy_nexthop_up", "1 if the LB nexthop answers its datapath probes, 0 if it was found down (and left its route unless it is the last of its family), -1 if unchecked.", hopLabels, nil)
	hopChange  = prometheus.NewDesc("causeway_proxy_nexthop_last_change_timestamp_seconds", "Time of the LB nexthop's last change of state (or of its first watch).", hopLabels, nil)
	hopSent    = prometheus.NewDesc("causeway_proxy_nexthop_probes_sent_total", "Echo probes sent to the LB nexthop.", hopLabels, nil)
	hopLost    = prometheus.NewDesc("causeway_proxy_nexthop_probes_lost_total", "Echo probes to the LB nexthop not answered within the interval.", hopLabels, nil)
	hopDowns   = prometheus.NewDesc("causeway_proxy_nexthop_downs_total", "Times the LB nexthop was found down.", hopLabels, nil)
	hopDropped = prometheus.NewDesc("causeway_proxy_nexthop_check_dropped_total", "Echo answers dropped by the probe sockets' full receive buffers (each one a lost probe of ours, not of the LB).", nil, nil)
)

// Describe implements prometheus.Collector.
func (m nexthopMetrics) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{hopUp, hopChange, hopSent, hopLost, hopDowns, hopDropped} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (m nexthopMetrics) Collect(ch chan<- prometheus.Metric) {
	for _, s := range m.c.Statuses() {
		up := map[nexthopcheck.State]float64{nexthopcheck.Up: 1, nexthopcheck.Down: 0, nexthopcheck.Unchecked: -1}[s.State]
		ch <- prometheus.MustNewConstMetric(hopUp, prometheus.GaugeValue, up, s.Addr)
		ch <- prometheus.MustNewConstMetric(hopChange, prometheus.GaugeValue, float64(s.Since.UnixNano())/1e9, s.Addr)
		ch <- prometheus.MustNewConstMetric(hopSent, prometheus.CounterValue, float64(s.Sent), s.Addr)
		ch <- prometheus.MustNewConstMetric(hopLost, prometheus.CounterValue, float64(s.Lost), s.Addr)
		ch <- prometheus.MustNewConstMetric(hopDowns, prometheus.CounterValue, float64(s.Downs), s.Addr)
	}
	ch <- prometheus.MustNewConstMetric(hopDropped, prometheus.CounterValue, float64(m.c.Dropped()))
}
