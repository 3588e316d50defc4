package feed

import (
	"context"
	"log/slog"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

// inspectedProvider is a provider that only shows fixed port states.
type inspectedProvider struct{ ports []servicelb.PortState }

func (p *inspectedProvider) OnServiceUpdate([]servicelb.Service)     {}
func (p *inspectedProvider) OnEndpointsUpdate([]servicelb.Endpoints) {}
func (p *inspectedProvider) Sync()                                   {}
func (p *inspectedProvider) SyncLoop(context.Context)                {}
func (p *inspectedProvider) CleanupLeftovers() error                 { return nil }
func (p *inspectedProvider) Close() error                            { return nil }
func (p *inspectedProvider) PortStates() []servicelb.PortState       { return p.ports }

// The metrics carry each service port's endpoints, counters and events,
// and the file's loads and rejections.
func TestServiceMetrics(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	s := &LB{cfg: Config{Provider: servicelb.ProviderUserspace}, log: log, events: newEventCounter(log),
		provider: &inspectedProvider{ports: []servicelb.PortState{{
			Service: "shop/dns", Addr: netip.MustParseAddrPort("10.96.0.53:53"), Protocol: servicelb.UDP,
			Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.5:53"), netip.MustParseAddrPort("10.0.0.6:53")},
			ProxyPort: 40000, UDPClients: 3, UDPRefused: 1,
		}, {
			Service: "shop/web", Addr: netip.MustParseAddrPort("10.96.0.80:80"), Protocol: servicelb.TCP,
			Endpoints: []netip.AddrPort{netip.MustParseAddrPort("10.0.0.5:80")}, ProxyPort: 40001, TCPConnections: 7,
		}}}}
	s.events.Record(servicelb.Event{Service: servicelb.ServicePortName{Namespace: "shop", Name: "dns"}, Reason: servicelb.EventDialFailed})
	s.reject(errTest)
	s.syncs = newSyncMetrics()
	s.syncs.handed([]time.Time{time.Now().Add(-2 * time.Second)})
	s.syncs.observe(0, nil) // started after the change was handed: programmed
	s.syncs.handed([]time.Time{time.Now()})
	s.syncs.observe(time.Second, errTest) // failed: still pending
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue() + float64(m.GetHistogram().GetSampleCount())
			got[mf.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	port := "{address=10.96.0.53:53,protocol=UDP,service=shop/dns}"
	web := "{address=10.96.0.80:80,protocol=TCP,service=shop/web}"
	last := got["kubeproxy_sync_proxy_rules_last_timestamp_seconds{}"]
	require.InDelta(t, float64(time.Now().Unix()), last, 3600, "the successful sync's time")
	delete(got, "kubeproxy_sync_proxy_rules_last_timestamp_seconds{}")
	require.Equal(t, map[string]float64{
		"causeway_proxy_service_endpoints" + port:                                 2,
		"causeway_proxy_service_udp_clients" + port:                               3,
		"causeway_proxy_service_udp_refused_total" + port:                         1,
		"causeway_proxy_service_endpoints" + web:                                  1,
		"causeway_proxy_service_tcp_connections" + web:                            7,
		"causeway_proxy_service_events_total{reason=DialFailed,service=shop/dns}": 1,
		"causeway_proxy_services_file_loads_total{}":                              0,
		"causeway_proxy_services_file_rejects_total{}":                            1,
		"kubeproxy_sync_proxy_rules_duration_seconds{}":                           2,
		"kubeproxy_network_programming_duration_seconds{}":                        1,
	}, got)
}

type testError string

func (e testError) Error() string { return string(e) }

const errTest = testError("services[0]: broken")
