package helmtest

import (
	"errors"
	"os"
	"path"
	"strings"
	"testing"

	"github.com/causeway-net/causeway/pkg/servicelb/filesource"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// servicesExample is the proxy's own example services file
// (docs/servicelb.md), used as a conduit's servicesFile value.
const servicesExample = "../../pkg/servicelb/filesource/testdata/example.yaml"

// bridgeNFSysctls are what the init container adds for the nftables
// provider (the proxy sets them too; the kubelet's /proc/sys is read-only
// for it).
// serviceVars are the proxy's variables of the service load balancer.
var serviceVars = []string{"NSM_SERVICES_FILE", "NSM_SERVICE_PROVIDER", "NSM_SERVICE_SYNC_PERIOD",
	"NSM_SERVICE_PORT_RANGE", "NSM_SERVICE_UDP_IDLE_TIMEOUT"}

var bridgeNFSysctls = []string{"net.bridge.bridge-nf-call-iptables=1", "net.bridge.bridge-nf-call-ip6tables=1"}

// servicesValues are values with services on, the example file on conduit
// lb-a and none on lb-b, plus extra top-level settings of services.
func servicesValues(t *testing.T, settings map[string]any) (string, map[string]any) {
	t.Helper()
	data, err := os.ReadFile(servicesExample)
	require.NoError(t, err)
	file := map[string]any{}
	require.NoError(t, yaml.Unmarshal(data, &file))
	svc := map[string]any{"enabled": true}
	for k, v := range settings {
		svc[k] = v
	}
	vals := map[string]any{
		"services": svc,
		"conduits": []any{
			map[string]any{"name": "lb-a", "servicesFile": file},
			map[string]any{"name": "lb-b"},
		},
	}
	out, err := yaml.Marshal(vals)
	require.NoError(t, err)
	return string(out), file
}

// TestServicesRender renders services on with each provider: the conduit
// with a servicesFile gets its ConfigMap, mounted read-only, and the
// variables; the other conduit runs without; the whole install passes the
// usual checks (variables known to the proxy, read-only root file system).
func TestServicesRender(t *testing.T) {
	for _, tc := range []struct {
		provider string
		settings map[string]any
		want     map[string]string
	}{
		{provider: "nftables", settings: map[string]any{},
			want: map[string]string{"NSM_SERVICE_PROVIDER": "nftables", "NSM_SERVICE_SYNC_PERIOD": "30s",
				"NSM_SERVICE_PORT_RANGE": "", "NSM_SERVICE_UDP_IDLE_TIMEOUT": "30s"}},
		{provider: "userspace", settings: map[string]any{"provider": "userspace", "syncPeriod": "1m",
			"portRange": "30000-30999", "udpIdleTimeout": "2m"},
			want: map[string]string{"NSM_SERVICE_PROVIDER": "userspace", "NSM_SERVICE_SYNC_PERIOD": "1m",
				"NSM_SERVICE_PORT_RANGE": "30000-30999", "NSM_SERVICE_UDP_IDLE_TIMEOUT": "2m"}},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			values, file := servicesValues(t, tc.settings)
			m := render(t, values)
			checkInstall(t, m, "trench-a", "dualstack", []string{"lb-a", "lb-b"})
			_, bins := loadReference(t)

			a := env(container(t, m.daemonSets[0].Spec.Template.Spec, "proxy"), bins["proxy"])
			require.NotEmpty(t, a["NSM_SERVICES_FILE"], "lb-a has a servicesFile")
			for k, v := range tc.want {
				assert.Equal(t, v, a[k], k)
			}
			content := servicesFileOf(t, m, m.daemonSets[0].Spec.Template.Spec, a)
			checkRoundTrip(t, content, file)

			b := env(container(t, m.daemonSets[1].Spec.Template.Spec, "proxy"), bins["proxy"])
			require.Empty(t, b["NSM_SERVICES_FILE"], "lb-b has no servicesFile")
			require.Len(t, servicesConfigMaps(m), 1, "one services ConfigMap, lb-a's")

			require.NoError(t, lint(t, values))
		})
	}
}

// checkRoundTrip: the ConfigMap's file parses with the proxy's parser to
// what the proxy's own example file parses to, and holds the values key
// for key.
func checkRoundTrip(t *testing.T, content string, values map[string]any) {
	t.Helper()
	got, err := filesource.Parse([]byte(content))
	require.NoError(t, err, "the proxy's parser refuses the ConfigMap:\n%s", content)
	want, err := filesource.Load(servicesExample)
	require.NoError(t, err)
	require.Equal(t, want, got)
	back := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(content), &back))
	require.Equal(t, values, back, "the file is the values, key for key")
}

// TestServicesOff: by default, and with servicesFile set but services not
// enabled, no proxy gets a services file, variable or volume.
func TestServicesOff(t *testing.T) {
	values, _ := servicesValues(t, map[string]any{"enabled": false})
	for name, v := range map[string]string{"default": "", "servicesFile without enabled": values} {
		t.Run(name, func(t *testing.T) {
			m := render(t, v)
			require.Empty(t, servicesConfigMaps(m))
			for _, ds := range m.daemonSets {
				spec := ds.Spec.Template.Spec
				c := container(t, spec, "proxy")
				for _, e := range c.Env {
					require.NotContains(t, serviceVars, e.Name)
				}
				for _, vol := range spec.Volumes {
					require.Nil(t, vol.ConfigMap, "volume %s", vol.Name)
				}
				require.NotContains(t, spec.InitContainers[0].Args[0], "br_netfilter")
			}
		})
	}
}

// TestServicesBridgeNetfilterCheck: with the nftables provider the init
// container stops, in one line that says what to do, on a node without
// br_netfilter.
func TestServicesBridgeNetfilterCheck(t *testing.T) {
	values, _ := servicesValues(t, nil)
	m := render(t, values)
	init := m.daemonSets[0].Spec.Template.Spec.InitContainers[0]
	script := init.Args[0]
	require.Contains(t, script, "test -e /proc/sys/net/bridge/bridge-nf-call-iptables ||")
	require.Contains(t, script, "modprobe br_netfilter")
	require.Contains(t, script, "/etc/modules-load.d/")
	require.Len(t, init.Env, 1)
	require.Equal(t, "spec.nodeName", init.Env[0].ValueFrom.FieldRef.FieldPath)

	values, _ = servicesValues(t, map[string]any{"provider": "userspace"})
	m = render(t, values)
	require.NotContains(t, m.daemonSets[0].Spec.Template.Spec.InitContainers[0].Args[0], "br_netfilter",
		"the userspace provider needs no bridge netfilter")
}

// TestServicesSchemaRejects: bad settings and bad services are refused at
// install, each message naming the value.
func TestServicesSchemaRejects(t *testing.T) {
	svc := func(s string) string {
		return "services: {enabled: true}\nconduits: [{name: a, servicesFile: {services: [" + s + "]}}]"
	}
	for _, tc := range []struct{ values, want string }{
		{"services: {provider: ebpf}", "/services/provider"},
		{"services: {portRange: 30000:31000}", "/services/portRange"},
		{"services: {portRange: 0-10}", "/services/portRange"},
		{"services: {portRange: 2000-1000}", `services.portRange "2000-1000"`},
		{"services: {portRange: 60000-70000}", `services.portRange "60000-70000"`},
		{"services: {syncPeriod: 30}", "/services/syncPeriod"},
		{"services: {udpIdleTimeout: soon}", "/services/udpIdleTimeout"},
		{"services: {enabled: true, bogus: 1}", "bogus"},
		{"services: {enabled: true}", "no conduit has a servicesFile"},
		{"conduits: [{name: a, servicesFile: {}}]", "services"},
		{svc("{name: web, ip: 10.96.0.10, ports: []}"), "/conduits/0/servicesFile/services/0/ports"},
		{svc("{name: web, ip: 10.96.0.10}"), "ports"},
		{svc("{ip: 10.96.0.10, ports: [{port: 80, protocol: TCP, targetPort: 80}]}"), "name"},
		{svc("{name: web, ip: 10.96.0.10, ports: [{port: 80, protocol: SCTP, targetPort: 80}]}"), "/conduits/0/servicesFile/services/0/ports/0/protocol"},
		{svc("{name: web, ip: 10.96.0.10, ports: [{port: 80, protocol: TCP}]}"), "conduits[0].servicesFile.services[0] (web) ports[0]: neither endpoints nor targetPort"},
		{svc("{name: web, ip: 10.96.0.10, ports: [{port: 0, protocol: TCP, targetPort: 80}]}"), "/conduits/0/servicesFile/services/0/ports/0/port"},
		{svc("{name: web, ip: 10.96.0.10, ports: [{port: 80, protocol: TCP, endpoints: [10.0.0.1]}]}"), "/conduits/0/servicesFile/services/0/ports/0/endpoints/0"},
		{svc("{name: web, ip: 10.96.0.10, affinity: sticky, ports: [{port: 80, protocol: TCP, targetPort: 80}]}"), "/conduits/0/servicesFile/services/0/affinity"},
		{svc("{name: web, ip: web.example, ports: [{port: 80, protocol: TCP, targetPort: 80}]}"), "/conduits/0/servicesFile/services/0/ip"},
		{svc("{name: web, ip: 10.96.0.10, weight: 2, ports: [{port: 80, protocol: TCP, targetPort: 80}]}"), "weight"},
	} {
		_, err := tryRender(tc.values)
		require.Error(t, err, tc.values)
		require.Contains(t, err.Error(), tc.want, "%s: the message should name the value", tc.values)
		t.Logf("%s -> %v", tc.values, firstLine(err.Error()))
	}
	for _, ok := range []string{
		"services: {portRange: \"30000\"}",
		svc("{name: web, ip: fd00:96::10, affinity: clientip, affinityTimeout: 1h, ports: [{port: 53, protocol: udp, endpoints: [\"[fd00::5]:53\"]}]}"),
	} {
		_, err := tryRender(ok)
		require.NoError(t, err, ok)
	}
}

// servicesFileOf checks how the proxy of spec gets its services file (a
// ConfigMap volume mounted read-only as a directory, so that the kubelet's
// updates reach it) and returns the file's content.
func servicesFileOf(t *testing.T, m *manifests, spec corev1.PodSpec, e map[string]string) string {
	t.Helper()
	c := container(t, spec, "proxy")
	p := e["NSM_SERVICES_FILE"]
	vm, v := mountOf(t, spec, c, p)
	require.True(t, vm.ReadOnly, "the services volume is read-only")
	require.Empty(t, vm.SubPath, "a subPath mount never sees the kubelet's updates")
	require.NotNil(t, v.ConfigMap, "%s is not on a ConfigMap volume", p)
	require.Equal(t, path.Dir(p), vm.MountPath, "the file is a key of the mounted ConfigMap")
	cm, ok := m.configMaps[v.ConfigMap.Name]
	require.True(t, ok, "ConfigMap %s is not rendered", v.ConfigMap.Name)
	content, ok := cm.Data[path.Base(p)]
	require.True(t, ok, "ConfigMap %s has no key %s", cm.Name, path.Base(p))
	return content
}

// checkProxyServices checks a proxy's services file, when it has one.
func checkProxyServices(t *testing.T, m *manifests, spec corev1.PodSpec, c corev1.Container, e map[string]string) {
	t.Helper()
	if e["NSM_SERVICES_FILE"] == "" {
		return
	}
	_, err := filesource.Parse([]byte(servicesFileOf(t, m, spec, e)))
	require.NoError(t, err, "%s: the proxy's parser refuses its services file", c.Name)
}

func servicesConfigMaps(m *manifests) []string {
	var out []string
	for name := range m.configMaps {
		if strings.HasSuffix(name, "-services") {
			out = append(out, name)
		}
	}
	return out
}

// lint runs helm lint with values; a warning or worse is an error.
func lint(t *testing.T, values string) error {
	t.Helper()
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(values), &vals))
	res := action.NewLint().Run([]string{absChart(t)}, vals)
	var problems []error
	for _, msg := range res.Messages {
		if msg.Severity >= support.WarningSev {
			problems = append(problems, errors.New(msg.Error()))
		}
	}
	return errors.Join(append(problems, res.Errors...)...)
}
