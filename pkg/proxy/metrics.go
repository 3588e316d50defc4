package proxy

import "github.com/prometheus/client_golang/prometheus"

// proxyMetric is one metric read from Stats at scrape time.
type proxyMetric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value func(Stats) float64
}

func gauge(name, help string, f func(Stats) float64) proxyMetric {
	return proxyMetric{prometheus.NewDesc("causeway_proxy_"+name, help, []string{"conduit", "trench"}, nil),
		prometheus.GaugeValue, f}
}

func counter(name, help string, f func(Stats) uint64) proxyMetric {
	return proxyMetric{prometheus.NewDesc("causeway_proxy_"+name, help, []string{"conduit", "trench"}, nil),
		prometheus.CounterValue, func(s Stats) float64 { return float64(f(s)) }}
}

var proxyMetrics = []proxyMetric{
	gauge("connections", "Connections holding addresses, without a pending release.",
		func(s Stats) float64 { return float64(s.Connections) }),
	gauge("allocations", "IPAM addresses held by the proxy, bridge included.",
		func(s Stats) float64 { return float64(s.Allocations) }),
	gauge("pending_releases", "Connections whose address release is scheduled or running.",
		func(s Stats) float64 { return float64(s.PendingReleases) }),
	gauge("bridge_ports", "NSM interfaces attached to the bridge.",
		func(s Stats) float64 { return float64(s.Ports) }),
	gauge("nexthops", "Load balancer addresses in the ECMP routes.",
		func(s Stats) float64 { return float64(s.Nexthops) }),
	gauge("vips", "VIPs with a source rule.",
		func(s Stats) float64 { return float64(s.VIPs) }),
	counter("ipam_errors_total", "Failed IPAM calls.", func(s Stats) uint64 { return s.IPAMErrors }),
	counter("dataplane_applies_total", "Successful dataplane applies.", func(s Stats) uint64 { return s.Applies }),
	counter("dataplane_apply_errors_total", "Failed dataplane applies.", func(s Stats) uint64 { return s.ApplyErrors }),
	counter("vips_rejected_total", "VIP entries rejected as invalid.", func(s Stats) uint64 { return s.VIPsRejected }),
	counter("releases_total", "Completed address releases.", func(s Stats) uint64 { return s.Releases }),
	counter("releases_cancelled_total", "Address releases cancelled by a reconnect.",
		func(s Stats) uint64 { return s.ReleasesCancelled }),
	counter("rollbacks_total", "Failed requests whose new allocations were rolled back.",
		func(s Stats) uint64 { return s.Rollbacks }),
	counter("bridge_address_changes_total", "Bridge addresses changed by the IPAM.",
		func(s Stats) uint64 { return s.BridgeAddrChanges }),
	counter("renewals_deferred_total", "Connection renewals the IPAM did not answer, answered with the addresses held.",
		func(s Stats) uint64 { return s.RenewalsDeferred }),
	gauge("owed_renewals", "Connections whose address leases are still to renew with the IPAM.",
		func(s Stats) float64 { return float64(s.OwedRenewals) }),
}

// Describe implements prometheus.Collector.
func (p *Proxy) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range proxyMetrics {
		ch <- m.desc
	}
	p.refusals.Describe(ch)
	p.idRefusals.Describe(ch)
}

// Collect implements prometheus.Collector; the values are read from Stats at
// scrape time.
func (p *Proxy) Collect(ch chan<- prometheus.Metric) {
	s := p.Stats()
	for _, m := range proxyMetrics {
		ch <- prometheus.MustNewConstMetric(m.desc, m.typ, m.value(s), p.cfg.Conduit, p.cfg.Trench)
	}
	p.refusals.Collect(ch)
	p.idRefusals.Collect(ch)
}
