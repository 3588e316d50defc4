package helmtest

import (
	"fmt"
	"net"
	"net/url"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/lint/support"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// installs are the value sets the chart is rendered with, on top of
// values.yaml, with the conduits each must produce.
var installs = []struct {
	name, family string
	values       string
	conduits     []string
}{
	{name: "ipv4", family: "ipv4", conduits: []string{"load-balancer"},
		values: "ipFamily: ipv4\nvips: [{name: vip-v4, address: 20.0.0.1/32}]\nproxy: {mtu: 1400}"},
	{name: "ipv6", family: "ipv6", conduits: []string{"load-balancer"},
		values: "ipFamily: ipv6\nvips: [{name: vip-v6, address: 2001:db8::1/128}]"},
	{name: "dualstack", family: "dualstack", conduits: []string{"load-balancer"}, values: ""},
	{name: "ipam replicas", family: "dualstack", conduits: []string{"load-balancer"}, values: "ipam: {replicas: 3}"},
	{name: "two conduits", family: "dualstack", conduits: []string{"lb-a", "lb-b"}, values: `
trench: {name: red}
conduits:
  - name: lb-a
  - name: lb-b
    destinationPortNats: [{port: 80, targetPort: 8080, protocol: tcp, vips: [vip-v4]}]
`},
}

func TestChartLints(t *testing.T) {
	for _, in := range installs {
		vals := map[string]any{}
		require.NoError(t, yaml.Unmarshal([]byte(in.values), &vals))
		res := action.NewLint().Run([]string{absChart(t)}, vals)
		for _, msg := range res.Messages {
			assert.Less(t, msg.Severity, support.WarningSev, "%s: %s", in.name, msg)
		}
		require.Empty(t, res.Errors, in.name)
	}
}

// TestChartRenders renders every install and checks the objects against the
// binaries' configuration reference.
func TestChartRenders(t *testing.T) {
	for _, in := range installs {
		t.Run(in.name, func(t *testing.T) {
			trench := "trench-a"
			if strings.Contains(in.values, "name: red") {
				trench = "red"
			}
			checkInstall(t, render(t, in.values), trench, in.family, in.conduits)
		})
	}
}

// TestExampleValuesRender renders the README's example values file.
func TestExampleValuesRender(t *testing.T) {
	data, err := os.ReadFile(exampleFile)
	require.NoError(t, err)
	m := render(t, string(data))
	checkInstall(t, m, "trench-a", "dualstack", []string{"load-balancer"})
	require.Equal(t, "registry.example.org/causeway/proxy:v0.1.0", m.daemonSets[0].Spec.Template.Spec.Containers[0].Image)
}

// checkInstall checks one rendered install against the binaries'
// configuration reference.
func checkInstall(t *testing.T, m *manifests, trench, family string, conduits []string) {
	t.Helper()
	ref, bins := loadReference(t)
	require.Len(t, m.daemonSets, len(conduits), "one proxy DaemonSet per conduit")
	for i, ds := range m.daemonSets {
		checkProxy(t, m, ref, bins, ds.Spec.Template.Spec, trench, conduits[i], family)
	}
	require.Len(t, m.statefulSets, 1)
	checkIPAM(t, m, bins, m.statefulSets[0].Spec.Template.Spec, trench, family)
	require.Len(t, m.deployments, 1)
	checkNSP(t, m, bins, m.deployments[0].Spec.Template.Spec, trench, conduits)
	checkAuthorizedIDs(t, m, bins)
	for _, spec := range allPods(m) {
		require.Contains(t, m.accounts, spec.ServiceAccountName, "service account of the pod")
		for _, c := range spec.Containers {
			checkEnvKnown(t, c, bins[c.Name])
			require.Empty(t, c.Command, "%s: the image's entrypoint is its binary", c.Name)
			require.Equal(t, int64(ref.ImageUser), *c.SecurityContext.RunAsUser, c.Name)
			require.True(t, *c.SecurityContext.ReadOnlyRootFilesystem, c.Name)
		}
	}
}

func allPods(m *manifests) []corev1.PodSpec {
	var out []corev1.PodSpec
	for _, ds := range m.daemonSets {
		out = append(out, ds.Spec.Template.Spec)
	}
	for _, s := range m.statefulSets {
		out = append(out, s.Spec.Template.Spec)
	}
	for _, d := range m.deployments {
		out = append(out, d.Spec.Template.Spec)
	}
	return out
}

// checkEnvKnown fails for a variable the container's binary does not read.
func checkEnvKnown(t *testing.T, c corev1.Container, b binary) {
	t.Helper()
	require.NotNil(t, b.defaults, "container %q is none of the binaries", c.Name)
	seen := map[string]bool{}
	for _, e := range c.Env {
		_, known := b.defaults[e.Name]
		assert.True(t, known, "%s: %s is not read by the binary (see %s)", c.Name, e.Name, refFile)
		assert.False(t, seen[e.Name], "%s: %s set twice", c.Name, e.Name)
		seen[e.Name] = true
	}
}

func container(t *testing.T, spec corev1.PodSpec, name string) corev1.Container {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

// mountOf returns the volume mounted at the directory holding path (the
// deepest mount that contains it).
func mountOf(t *testing.T, spec corev1.PodSpec, c corev1.Container, p string) (corev1.VolumeMount, corev1.Volume) {
	t.Helper()
	var best corev1.VolumeMount
	for _, vm := range c.VolumeMounts {
		if (p == vm.MountPath || strings.HasPrefix(p, strings.TrimSuffix(vm.MountPath, "/")+"/")) && len(vm.MountPath) > len(best.MountPath) {
			best = vm
		}
	}
	require.NotEmpty(t, best.Name, "%s: %s is on no volume", c.Name, p)
	for _, v := range spec.Volumes {
		if v.Name == best.Name {
			return best, v
		}
	}
	return best, corev1.Volume{Name: best.Name} // a volume claim template
}

// unixPath is the path of a unix:// URL.
func unixPath(t *testing.T, raw string) string {
	t.Helper()
	u, err := url.Parse(raw)
	require.NoError(t, err, raw)
	require.Equal(t, "unix", u.Scheme, raw)
	return u.Path
}

// checkHostSocket checks that the socket of a unix:// URL is on a
// read-only hostPath volume.
func checkHostSocket(t *testing.T, spec corev1.PodSpec, c corev1.Container, raw string) {
	t.Helper()
	vm, v := mountOf(t, spec, c, unixPath(t, raw))
	require.NotNil(t, v.HostPath, "%s: %s is not on a hostPath volume", c.Name, raw)
	require.True(t, vm.ReadOnly, "%s: %s", c.Name, vm.Name)
	require.Equal(t, vm.MountPath, v.HostPath.Path, "the node's socket directory appears where the binary looks")
}

func checkProxy(t *testing.T, m *manifests, ref reference, bins map[string]binary, spec corev1.PodSpec, trench, conduit, family string) {
	t.Helper()
	c := container(t, spec, "proxy")
	e := env(c, bins["proxy"])
	// Names composed as Meridio's operator does.
	require.Equal(t, fmt.Sprintf("proxy.%s.%s.%s", conduit, trench, namespace), e["NSM_SERVICE_NAME"])
	require.Equal(t, fmt.Sprintf("%s.%s.%s", conduit, trench, namespace), e["NSM_NETWORK_SERVICE_NAME"])
	require.Equal(t, conduit, e["NSM_CONDUIT"])
	require.Equal(t, trench, e["NSM_TRENCH"])
	require.Equal(t, namespace, e["NSM_NAMESPACE"])
	require.Equal(t, family, e["NSM_IP_FAMILY"])
	require.Equal(t, "<metadata.name>", e["NSM_NAME"])
	require.Equal(t, "<spec.nodeName>", e["NSM_HOST"])

	// The IPAM and NSP addresses the proxy dials are the chart's Services.
	checkServiceAddress(t, m, e["NSM_IPAM_SERVICE"], m.statefulSets[0].Spec.Template.Spec, "ipam", "grpc")
	nsp := fmt.Sprintf("%s-%s.%s:%s", e["NSM_NSP_SERVICE_NAME"], e["NSM_TRENCH"], e["NSM_NAMESPACE"], e["NSM_NSP_SERVICE_PORT"])
	if e["NSM_NSP_SERVICE"] != "" {
		nsp = e["NSM_NSP_SERVICE"]
	}
	checkServiceAddress(t, m, nsp, m.deployments[0].Spec.Template.Spec, "nsp", "grpc")

	// Sockets: NSMgr and SPIRE from the node, its own on a writable emptyDir.
	checkHostSocket(t, spec, c, e["NSM_CONNECT_TO"])
	checkHostSocket(t, spec, c, e["SPIFFE_ENDPOINT_SOCKET"])
	own := []string{e["NSM_HEALTH_SOCKET"], e["NSM_DEBUG_SOCKET"]}
	if e["NSM_LISTEN_ON"] == "" {
		own = append(own, "/tmp/nse") // a fresh directory under TMPDIR (unset: /tmp)
	}
	for _, p := range own {
		vm, v := mountOf(t, spec, c, strings.TrimPrefix(p, "unix://"))
		require.NotNil(t, v.EmptyDir, "%s is not on an emptyDir", p)
		require.False(t, vm.ReadOnly, p)
	}

	// Exec probes of the binary itself, each on its probe service.
	for kind, p := range map[string]*corev1.Probe{"startup": c.StartupProbe, "readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p, kind)
		require.NotNil(t, p.Exec, kind)
		require.Equal(t, []string{bins["proxy"].image, "-probe", kind}, p.Exec.Command, kind)
	}

	sc := c.SecurityContext
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Equal(t, []corev1.Capability{"NET_ADMIN"}, sc.Capabilities.Add,
		"the bounding set of the binary's file capability: NET_ADMIN only")
	require.True(t, *sc.AllowPrivilegeEscalation, "file capabilities need no_new_privs off")
	require.True(t, *sc.RunAsNonRoot)
	require.NotNil(t, c.Resources.Limits.Memory())
	require.False(t, c.Resources.Limits.Memory().IsZero(), "memory limit")

	// The init container sets exactly what the dataplane checks.
	require.Len(t, spec.InitContainers, 1)
	init := spec.InitContainers[0]
	require.Len(t, init.Args, 1)
	var set []string
	for _, cmd := range strings.Split(init.Args[0], ";") {
		if kv, ok := strings.CutPrefix(strings.TrimSpace(cmd), "sysctl -w "); ok {
			set = append(set, kv)
		}
	}
	// ping_group_range (dataplane.Options.EchoSockets) has a space in its
	// value, so it is quoted, on a line of its own.
	want := append(slices.Clone(ref.ProxySysctls[family]), `"net.ipv4.ping_group_range=0 2147483647"`)
	if (e["NSM_SERVICES_FILE"] != "" || e["NSM_SERVICES_SOURCE"] == "kubernetes") && e["NSM_SERVICE_PROVIDER"] == "nftables" {
		want = append(want, bridgeNFSysctls...)
	}
	require.ElementsMatch(t, want, set, "sysctls of the init container for %s", family)
	checkProxyServices(t, m, spec, c, e)
}

// checkServiceAddress checks that host:port names a Service of the chart
// (short name or <name>.<namespace>) whose port leads to the named
// container port of the pods of spec.
func checkServiceAddress(t *testing.T, m *manifests, addr string, spec corev1.PodSpec, containerName, portName string) {
	t.Helper()
	host, port, err := net.SplitHostPort(addr)
	require.NoError(t, err, addr)
	name, ns, qualified := strings.Cut(host, ".")
	if qualified {
		require.Equal(t, namespace, ns, addr)
	}
	svc, ok := m.services[name]
	require.True(t, ok, "%s: no Service %q", addr, name)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	var sp *corev1.ServicePort
	for i := range svc.Spec.Ports {
		if int(svc.Spec.Ports[i].Port) == n {
			sp = &svc.Spec.Ports[i]
		}
	}
	require.NotNil(t, sp, "%s: Service %s has no port %d", addr, name, n)
	require.Equal(t, intstr.FromString(portName), sp.TargetPort)
	c := container(t, spec, containerName)
	found := false
	for _, p := range c.Ports {
		found = found || p.Name == portName
	}
	require.True(t, found, "%s has no port %q", containerName, portName)
}

// containerPort returns the number of a named port of c.
func containerPort(t *testing.T, c corev1.Container, name string) int {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return int(p.ContainerPort)
		}
	}
	t.Fatalf("%s has no port %q", c.Name, name)
	return 0
}

// checkGRPCProbes checks the kubelet's gRPC probes of c: on the plain-text
// health port the binary opens (healthVar), readiness on service.
func checkGRPCProbes(t *testing.T, c corev1.Container, e map[string]string, healthVar, service string) {
	t.Helper()
	port, err := strconv.Atoi(e[healthVar])
	require.NoError(t, err, healthVar)
	require.NotZero(t, port, "%s must be set for the probes", healthVar)
	require.Equal(t, port, containerPort(t, c, "health"))
	for kind, p := range map[string]*corev1.Probe{"readiness": c.ReadinessProbe, "liveness": c.LivenessProbe} {
		require.NotNil(t, p, kind)
		require.NotNil(t, p.GRPC, kind)
		require.Equal(t, int32(port), p.GRPC.Port, kind)
	}
	require.Equal(t, service, *c.ReadinessProbe.GRPC.Service)
}

func checkIPAM(t *testing.T, m *manifests, bins map[string]binary, spec corev1.PodSpec, trench, family string) {
	t.Helper()
	c := container(t, spec, "ipam")
	e := env(c, bins["ipam"])
	require.Equal(t, trench, e["IPAM_TRENCH_NAME"])
	require.Equal(t, family, e["IPAM_IP_FAMILY"])
	require.Equal(t, "172.16.0.0/16", e["IPAM_PREFIX_IPV4"], "Meridio's chart pool")
	require.Equal(t, e["IPAM_PORT"], strconv.Itoa(containerPort(t, c, "grpc")))
	checkGRPCProbes(t, c, e, "IPAM_HEALTH_PORT", "ipam.v1.Ipam")
	checkServiceAddress(t, m, e["IPAM_NSP_SERVICE"], m.deployments[0].Spec.Template.Spec, "nsp", "grpc")
	checkHostSocket(t, spec, c, e["SPIFFE_ENDPOINT_SOCKET"])
	require.Empty(t, c.SecurityContext.Capabilities.Add)
	if e["IPAM_STORE"] == "kubernetes" {
		checkIPAMReplicas(t, m, e)
		return
	}

	// The store is on the volume claim.
	vm, _ := mountOf(t, spec, c, e["IPAM_DATASOURCE"])
	require.Equal(t, path.Dir(e["IPAM_DATASOURCE"]), vm.MountPath)
	claims := m.statefulSets[0].Spec.VolumeClaimTemplates
	require.Len(t, claims, 1)
	require.Equal(t, claims[0].Name, vm.Name)
	roles, _ := otherRoles(m)
	require.Empty(t, roles, "one replica on a file: no Role in its namespace")
	checkIPAMNodesRole(t, m, e, spec)
}

// ipam.freeDeletedNodes false: the IPAM on its file holds no token and no
// grant, and does not watch the nodes.
func TestIPAMWithoutNodesWatch(t *testing.T) {
	m := render(t, "ipam: {freeDeletedNodes: false}")
	spec := m.statefulSets[0].Spec.Template.Spec
	require.False(t, *spec.AutomountServiceAccountToken)
	require.Empty(t, m.clusterRoles)
	require.Empty(t, m.bindings)
	for _, e := range spec.Containers[0].Env {
		require.NotEqual(t, "IPAM_FREE_DELETED_NODES", e.Name)
	}
}

// nspFile is the configuration server's file as the chart writes it.
type nspFile struct {
	Trenches []struct {
		Name string `json:"name"`
	} `json:"trenches"`
	Conduits []struct {
		Name                string `json:"name"`
		Trench              string `json:"trench"`
		DestinationPortNats []any  `json:"destinationPortNats,omitempty"`
	} `json:"conduits"`
	VIPs []struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Trench  string `json:"trench"`
	} `json:"vips"`
}

func checkNSP(t *testing.T, m *manifests, bins map[string]binary, spec corev1.PodSpec, trench string, conduits []string) {
	t.Helper()
	c := container(t, spec, "nsp")
	e := env(c, bins["nsp"])
	require.Equal(t, e["NSP_PORT"], strconv.Itoa(containerPort(t, c, "grpc")))
	checkGRPCProbes(t, c, e, "NSP_HEALTH_PORT", "nsp.v1.ConfigurationManager")
	checkHostSocket(t, spec, c, e["SPIFFE_ENDPOINT_SOCKET"])

	// NSP_CONFIG_FILE is a key of the ConfigMap mounted at its directory.
	file := e["NSP_CONFIG_FILE"]
	vm, v := mountOf(t, spec, c, file)
	require.Equal(t, path.Dir(file), vm.MountPath)
	require.NotNil(t, v.ConfigMap, "%s is not from a ConfigMap", file)
	cm, ok := m.configMaps[v.ConfigMap.Name]
	require.True(t, ok, "ConfigMap %s", v.ConfigMap.Name)
	data, ok := cm.Data[path.Base(file)]
	require.True(t, ok, "ConfigMap %s has no key %s", cm.Name, path.Base(file))
	var f nspFile
	require.NoError(t, yaml.UnmarshalStrict([]byte(data), &f), data)
	require.Len(t, f.Trenches, 1)
	require.Equal(t, trench, f.Trenches[0].Name)
	var names []string
	for _, cd := range f.Conduits {
		names = append(names, cd.Name)
		require.Equal(t, trench, cd.Trench)
	}
	require.Equal(t, conduits, names)
	require.NotEmpty(t, f.VIPs)
	for _, vip := range f.VIPs {
		require.Equal(t, trench, vip.Trench)
	}
	require.Empty(t, c.SecurityContext.Capabilities.Add)
}

// TestSchemaRejectsBadValues checks that values.schema.json refuses bad
// values and that the message names the value.
func TestSchemaRejectsBadValues(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"ipFamily: ipv5", "/ipFamily"},
		{"trench: {name: Trench_A}", "/trench/name"},
		{"conduits: []", "/conduits"},
		{"conduits: [{name: a, bogus: 1}]", "bogus"},
		{"subnetPool: {ipv4: {prefix: 172.16.0.0, conduitPrefixLength: 20, nodePrefixLength: 24}}", "/subnetPool/ipv4/prefix"},
		{"subnetPool: {ipv6: {prefix: fd00::/48, conduitPrefixLength: 56, nodePrefixLength: 129}}", "/subnetPool/ipv6/nodePrefixLength"},
		{"proxy: {mtu: 1000}", "/proxy/mtu"},
		{"ipFamily: ipv4\nproxy: {mtu: 500}", "/proxy/mtu"},
		{"proxy: {ipReleaseDelay: 20}", "/proxy/ipReleaseDelay"},
		{"logLevel: verbose", "/logLevel"},
		{"nsm: {socketDir: relative/dir}", "/nsm/socketDir"},
		{"vips: [{name: v, address: 20.0.0.1}]", "/vips/0/address"},
		{"unknownKey: 1", "unknownKey"},
	} {
		_, err := tryRender(tc.values)
		require.Error(t, err, tc.values)
		require.Contains(t, err.Error(), tc.want, "%s: the message should name the value", tc.values)
		t.Logf("%s -> %v", tc.values, firstLine(err.Error()))
	}
	_, err := tryRender("ipFamily: ipv4\nproxy: {mtu: 576}")
	require.NoError(t, err, "576 is valid for IPv4 only")
}

func firstLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// checkAuthorizedIDs checks, with the chart's default idScheme (any), that
// the IPAM authorizes the proxies and the configuration server the proxies
// and the IPAM, under both ways SPIRE names their pods, and nobody else
// (spiffe_test.go has the cases).
func checkAuthorizedIDs(t *testing.T, m *manifests, bins map[string]binary) {
	t.Helper()
	rules := authorizedRules(t, m, bins)
	for _, scheme := range []string{"pod", "serviceAccount"} {
		ids := podIDs(m, "example.org", scheme)
		for _, id := range ids.proxies {
			require.True(t, allowed(rules.ipam, id, "example.org"), "the IPAM serves the proxy %s", id)
			require.True(t, allowed(rules.nsp, id, "example.org"), "the nsp serves the proxy %s", id)
		}
		require.True(t, allowed(rules.nsp, ids.ipam, "example.org"), "the nsp serves the IPAM %s", ids.ipam)
		// Replicas: a standby forwards to the leader as itself.
		replicas := *m.statefulSets[0].Spec.Replicas > 1
		require.Equal(t, replicas, allowed(rules.ipam, ids.ipam, "example.org"), "the IPAM serves itself only when replicated")
		require.False(t, allowed(rules.ipam, ids.nsp, "example.org"), "the IPAM does not serve the nsp")
	}
}

// TestInsecureInstall: insecure asks every binary for plain gRPC and
// authorizes nobody by SPIFFE ID (the binaries refuse both together).
func TestInsecureInstall(t *testing.T) {
	_, bins := loadReference(t)
	m := render(t, "insecure: true")
	for _, spec := range allPods(m) {
		for _, c := range spec.Containers {
			checkEnvKnown(t, c, bins[c.Name])
			e := env(c, bins[c.Name])
			prefix := map[string]string{"proxy": "NSM", "ipam": "IPAM", "nsp": "NSP"}[c.Name]
			require.Equal(t, "true", e[prefix+"_INSECURE"], c.Name)
			require.Empty(t, e[prefix+"_AUTHORIZED_IDS"], c.Name)
		}
	}
}
