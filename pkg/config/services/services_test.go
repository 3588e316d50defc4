package services

import (
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/causeway-net/causeway/pkg/servicelb"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestExample(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	require.NoError(t, err)
	f, err := Parse(data)
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/24"), netip.MustParsePrefix("fd00:96::/112")}, f.RoutePrefixes())
	assert.True(t, f.UsesTargets())

	svcs := f.ServiceList()
	require.Len(t, svcs, 2)
	assert.Equal(t, servicelb.Reference{Namespace: "shop", Name: "web"}, svcs[0].Ref)
	assert.Equal(t, servicelb.AffinityNone, svcs[0].Affinity)
	assert.Equal(t, []servicelb.ServicePort{{Name: "http", Port: 80, Protocol: servicelb.TCP}, {Name: "dns", Port: 53, Protocol: servicelb.UDP}}, svcs[0].Ports)
	assert.Equal(t, servicelb.AffinityClientIP, svcs[1].Affinity)
	assert.Equal(t, 10*time.Minute, svcs[1].AffinityTimeout)

	targets := []netip.Addr{netip.MustParseAddr("172.30.0.3"), netip.MustParseAddr("fd5a::3"), netip.MustParseAddr("172.30.0.2"),
		netip.MustParseAddr("::ffff:172.30.0.2")}
	eps := f.EndpointList(targets)
	require.Len(t, eps, 2)
	byPort := eps[0].ByPort()
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("172.30.0.2:8080"), netip.MustParseAddrPort("172.30.0.3:8080")},
		byPort[servicelb.ServicePortName{Namespace: "shop", Name: "web", Port: "http"}], "targets of the family, sorted, once each")
	assert.Len(t, byPort[servicelb.ServicePortName{Namespace: "shop", Name: "web", Port: "dns"}], 2)
	assert.Equal(t, []netip.AddrPort{netip.MustParseAddrPort("[fd00:5::1]:80"), netip.MustParseAddrPort("[fd5a::3]:8080")},
		eps[1].ByPort()[servicelb.ServicePortName{Namespace: "shop", Name: "web6"}])
}

func TestHostPrefixesByDefault(t *testing.T) {
	f, err := Parse([]byte("services:\n  - {name: a, ip: 10.1.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n" +
		"  - {name: b, ip: 'fd00::1', ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n"))
	require.NoError(t, err)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.1.0.1/32"), netip.MustParsePrefix("fd00::1/128")}, f.RoutePrefixes())
	assert.Equal(t, DefaultNamespace, f.Services[0].Namespace)
}

func TestRejected(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"empty", "", "the file is empty"},
		{"unknown field", "services: []\nextra: 1\n", "field extra not found"},
		{"bad prefix", "prefixes: [10.96.0.1/24]\nservices: []\n", `prefixes[0] (line 1): "10.96.0.1/24" has host bits set`},
		{"no name", "services:\n  - {ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", `services[0] "default/" (line 2): name is empty`},
		{"duplicate", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n" +
			"  - {name: a, ip: 10.0.0.2, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", `services[1] "default/a" (line 3): default/a is already defined by services[0]`},
		{"bad ip", "services:\n  - {name: a, ip: 10.0.0, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", `ip "10.0.0" is not an IP address`},
		{"loopback", "services:\n  - {name: a, ip: 127.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", "cannot be a service IP"},
		{"outside prefixes", "prefixes: [10.96.0.0/24]\nservices:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", "is in none of the prefixes"},
		{"affinity", "services:\n  - {name: a, ip: 10.0.0.1, affinity: sticky, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", `affinity "sticky" is not None or ClientIP`},
		{"timeout without affinity", "services:\n  - {name: a, ip: 10.0.0.1, affinityTimeout: 1m, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n", "affinityTimeout is set without affinity ClientIP"},
		{"no ports", "services:\n  - {name: a, ip: 10.0.0.1}\n", "ports is empty"},
		{"protocol", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: sctp, targetPort: 1}]}\n", `services[0] "default/a" (line 2) ports[0]: unknown protocol "sctp"`},
		{"port 0", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{protocol: tcp, targetPort: 1}]}\n", "ports[0]: port is missing or 0"},
		{"no endpoints", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp}]}\n", "neither endpoints nor targetPort"},
		{"unnamed ports", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}, {port: 2, protocol: tcp, targetPort: 1}]}\n", "a service with several ports names each"},
		{"endpoint", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, endpoints: [10.0.0.2]}]}\n", `endpoints[0]: "10.0.0.2" is not address:port`},
		{"endpoint zone", "services:\n  - {name: a, ip: fd96::1, ports: [{port: 1, protocol: tcp, endpoints: ['[fe80::1%eth0]:80']}]}\n", `"[fe80::1%eth0]:80" is link-local or has a zone`},
		{"endpoint link-local", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, endpoints: ['169.254.0.2:80']}]}\n", "is link-local or has a zone"},
		{"endpoint family", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, endpoints: ['[fd00::1]:80']}]}\n", "is not of the service IP's family"},
		{"same listener", "services:\n  - {name: a, ip: 10.0.0.1, ports: [{port: 1, protocol: tcp, targetPort: 1}]}\n" +
			"  - {name: b, ip: 10.0.0.1, ports: [{port: 1, protocol: TCP, targetPort: 2}]}\n", "TCP 10.0.0.1:1 is already served by services[0]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}
