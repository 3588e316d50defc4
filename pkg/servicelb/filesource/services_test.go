package filesource

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
		{"default route", "prefixes: [10.96.0.0/24, 0.0.0.0/0]\nservices: []\n", `prefixes[1] (line 1): 0.0.0.0/0 is a default route`},
		{"default route 6", "prefixes: ['::/0']\nservices: []\n", `prefixes[0] (line 1): ::/0 is a default route`},
		{"half the internet", "prefixes: [0.0.0.0/1, 128.0.0.0/1]\nservices: []\n", `prefixes[1] (line 1): 128.0.0.0/1 is shorter than /8`},
		{"wide 6", "prefixes: ['fc00::/7']\nservices: []\n", `fc00::/7 is shorter than /8`},
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

func TestWidePrefixesAccepted(t *testing.T) {
	f, err := Parse([]byte("prefixes: [10.0.0.0/8, 'fd00::/8']\nservices:\n  - {name: a, ip: 10.1.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n"))
	require.NoError(t, err)
	assert.Len(t, f.RoutePrefixes(), 2)
}

var facts = Facts{
	VIPs:   []netip.Prefix{netip.MustParsePrefix("20.0.0.1/32"), netip.MustParsePrefix("40.0.0.0/24"), netip.MustParsePrefix("2001:db8::1/128")},
	Bridge: []netip.Prefix{netip.MustParsePrefix("172.16.0.1/24"), netip.MustParsePrefix("fd00::1/64")},
}

// ParseFor refuses a file whose service IPs or prefixes collide with the
// proxy's VIPs, bridge address or node subnet, naming each entry and the
// reason; Parse, without facts, takes it.
func TestCollisionsRefused(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"vip", "services:\n  - {name: a, ip: 20.0.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`services[0] "default/a" (line 2): ip 20.0.0.1 is in the VIP 20.0.0.1/32: the service would take over the VIP's traffic`},
		{"in a vip prefix", "services:\n  - {name: a, ip: 40.0.0.7, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`ip 40.0.0.7 is in the VIP 40.0.0.0/24`},
		{"vip6", "services:\n  - {name: a, ip: '2001:db8::1', ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`ip 2001:db8::1 is in the VIP 2001:db8::1/128`},
		{"gateway", "services:\n  - {name: a, ip: 172.16.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`services[0] "default/a" (line 2): ip 172.16.0.1 is the proxy's own address on the bridge (the targets' gateway)`},
		{"gateway6", "services:\n  - {name: a, ip: 'fd00::1', ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`ip fd00::1 is the proxy's own address on the bridge`},
		{"node subnet", "services:\n  - {name: a, namespace: x, ip: 172.16.0.9, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`services[0] "x/a" (line 2): ip 172.16.0.9 is in 172.16.0.0/24, the conduit's node subnet`},
		{"prefix over the node subnet", "prefixes: [10.96.0.0/24, 172.16.0.0/16]\nservices:\n  - {name: a, ip: 10.96.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n",
			`prefixes[1] (line 1): 172.16.0.0/16 overlaps 172.16.0.0/24, the conduit's node subnet`},
		{"prefix in the node subnet", "prefixes: ['fd00::8000/113']\nservices: []\n",
			`prefixes[0] (line 1): fd00::8000/113 overlaps fd00::/64`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			require.NoError(t, err, "no facts, no collision")
			_, err = ParseFor([]byte(tc.doc), facts)
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// Resolve leaves out the colliding services and prefixes of the file in
// force, says why, and serves the rest.
func TestResolve(t *testing.T) {
	f, err := Parse([]byte("prefixes: [10.96.0.0/24, 20.0.0.0/24, 172.16.0.0/23]\nservices:\n" +
		"  - {name: a, ip: 10.96.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n" +
		"  - {name: b, ip: 20.0.0.1, ports: [{port: 80, protocol: tcp, targetPort: 80}]}\n"))
	require.NoError(t, err)
	same, errs := f.Resolve(Facts{})
	require.Empty(t, errs)
	require.Same(t, f, same)

	r, errs := f.Resolve(facts)
	require.Len(t, errs, 2)
	assert.Equal(t, `prefixes[2]: 172.16.0.0/23 overlaps 172.16.0.0/24, the conduit's node subnet, where the targets' addresses come from: the targets would reach their neighbours via the gateway`, errs[0].Error())
	assert.Equal(t, `services[1] "default/b": ip 20.0.0.1 is in the VIP 20.0.0.1/32: the service would take over the VIP's traffic`, errs[1].Error())
	require.Len(t, r.ServiceList(), 1)
	assert.Equal(t, "a", r.ServiceList()[0].Ref.Name)
	assert.Equal(t, []netip.Prefix{netip.MustParsePrefix("10.96.0.0/24"), netip.MustParsePrefix("20.0.0.0/24")}, r.RoutePrefixes())
	assert.Len(t, f.Services, 2, "the file in force is not changed")
}
