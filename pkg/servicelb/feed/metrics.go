package feed

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The service load balancer's metrics, read at scrape time.
var (
	svcLabels      = []string{"service", "protocol", "address"}
	svcEndpoints   = prometheus.NewDesc("causeway_proxy_service_endpoints", "Endpoints of a service port.", svcLabels, nil)
	svcNewFlows    = prometheus.NewDesc("causeway_proxy_service_new_flows", "New connections or UDP flows the nftables provider sent to a service port since its dispatch rule was last written.", svcLabels, nil)
	svcTCPConns    = prometheus.NewDesc("causeway_proxy_service_tcp_connections", "TCP connections a userspace service port relays or dials.", svcLabels, nil)
	svcUDPClients  = prometheus.NewDesc("causeway_proxy_service_udp_clients", "UDP flows (backend sockets) of a userspace service port.", svcLabels, nil)
	svcUDPRefused  = prometheus.NewDesc("causeway_proxy_service_udp_refused_total", "UDP flows refused at the bound of a userspace service port.", svcLabels, nil)
	svcEvents      = prometheus.NewDesc("causeway_proxy_service_events_total", "Events of the userspace sockets, by service port and reason.", []string{"service", "reason"}, nil)
	svcFileLoads   = prometheus.NewDesc("causeway_proxy_services_file_loads_total", "Versions of the services file taken into force.", nil, nil)
	svcFileRejects = prometheus.NewDesc("causeway_proxy_services_file_rejects_total", "Versions of the services file refused (the last good one stays).", nil, nil)
	svcSyncObjects = prometheus.NewDesc("causeway_proxy_service_sync_objects_total", "nftables objects sent by the service load balancer's syncs.", nil, nil)
	svcAPIAway     = prometheus.NewDesc("causeway_proxy_services_api_away", "1 while the Kubernetes services source's last list or watch failed (the last known services are served).", nil, nil)
	svcAPIOutages  = prometheus.NewDesc("causeway_proxy_services_api_outages_total", "Times the API server went away for the Kubernetes services source.", nil, nil)
)

// Describe implements prometheus.Collector.
func (s *LB) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{svcEndpoints, svcNewFlows, svcTCPConns, svcUDPClients, svcUDPRefused, svcEvents, svcFileLoads,
		svcFileRejects, svcSyncObjects, svcAPIAway, svcAPIOutages} {
		ch <- d
	}
	if s.syncs != nil {
		s.syncs.Describe(ch)
	}
	if s.idRefusals != nil {
		s.idRefusals.Describe(ch)
	}
	if s.refusals != nil {
		s.refusals.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (s *LB) Collect(ch chan<- prometheus.Metric) {
	st := s.State()
	for _, p := range st.Ports {
		labels := []string{p.Service, string(p.Protocol), p.Addr.String()}
		ch <- prometheus.MustNewConstMetric(svcEndpoints, prometheus.GaugeValue, float64(len(p.Endpoints)), labels...)
		if p.Chain != "" && p.NewFlows >= 0 {
			ch <- prometheus.MustNewConstMetric(svcNewFlows, prometheus.GaugeValue, float64(p.NewFlows), labels...)
		}
		if p.ProxyPort != 0 && p.Protocol == "TCP" {
			ch <- prometheus.MustNewConstMetric(svcTCPConns, prometheus.GaugeValue, float64(p.TCPConnections), labels...)
		}
		if p.ProxyPort != 0 && p.Protocol == "UDP" {
			ch <- prometheus.MustNewConstMetric(svcUDPClients, prometheus.GaugeValue, float64(p.UDPClients), labels...)
			ch <- prometheus.MustNewConstMetric(svcUDPRefused, prometheus.CounterValue, float64(p.UDPRefused), labels...)
		}
	}
	for svc, m := range st.Events {
		for reason, n := range m {
			ch <- prometheus.MustNewConstMetric(svcEvents, prometheus.CounterValue, float64(n), svc, string(reason))
		}
	}
	if k := st.Kubernetes; k != nil {
		away := 0.0
		if k.Source.APIServerAway {
			away = 1
		}
		ch <- prometheus.MustNewConstMetric(svcAPIAway, prometheus.GaugeValue, away)
		ch <- prometheus.MustNewConstMetric(svcAPIOutages, prometheus.CounterValue, float64(k.Source.Outages))
	} else {
		s.mu.Lock()
		loads, rejects := s.accepted, s.rejects
		s.mu.Unlock()
		ch <- prometheus.MustNewConstMetric(svcFileLoads, prometheus.CounterValue, float64(loads))
		ch <- prometheus.MustNewConstMetric(svcFileRejects, prometheus.CounterValue, float64(rejects))
	}
	if s.syncs != nil {
		s.syncs.Collect(ch)
	}
	if s.idRefusals != nil {
		s.idRefusals.Collect(ch)
	}
	if s.refusals != nil {
		s.refusals.Collect(ch)
	}
	if st.Stats != nil {
		ch <- prometheus.MustNewConstMetric(svcSyncObjects, prometheus.CounterValue, float64(st.Stats.TotalObjects))
	}
}
