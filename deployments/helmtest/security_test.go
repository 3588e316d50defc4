package helmtest

import (
	"path"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// proxyEnv renders values and returns the proxy's effective environment
// of every conduit.
func proxyEnv(t *testing.T, values string) []map[string]string {
	t.Helper()
	m := render(t, values)
	_, bins := loadReference(t)
	var out []map[string]string
	for _, ds := range m.daemonSets {
		out = append(out, env(container(t, ds.Spec.Template.Spec, "proxy"), bins["proxy"]))
	}
	require.NotEmpty(t, out)
	return out
}

// TestVIPAndEndpointBounds: the proxies refuse VIPs over the cluster's
// networks and the pools, bound their width, and keep endpoints inside the
// pools; the port filter is on unless turned off.
func TestVIPAndEndpointBounds(t *testing.T) {
	for _, e := range proxyEnv(t, "") {
		require.Equal(t, "172.16.0.0/16,fd00::/48", e["NSM_CLUSTER_PREFIXES"])
		require.Equal(t, "172.16.0.0/16,fd00::/48", e["NSM_ENDPOINT_PREFIXES"])
		require.Equal(t, "24", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV4"])
		require.Equal(t, "120", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV6"])
		require.Equal(t, "false", e["NSM_PORT_FILTER_OFF"])
	}
	values := "clusterNetworks: [10.96.0.0/12, 10.244.0.0/16]\nproxy: {vipMinPrefixLength: {ipv4: 28, ipv6: 112}, portFilter: false}\n"
	for _, e := range proxyEnv(t, values) {
		require.Equal(t, "10.96.0.0/12,10.244.0.0/16,172.16.0.0/16,fd00::/48", e["NSM_CLUSTER_PREFIXES"])
		require.Equal(t, "28", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV4"])
		require.Equal(t, "112", e["NSM_VIP_MIN_PREFIX_LENGTH_IPV6"])
		require.Equal(t, "true", e["NSM_PORT_FILTER_OFF"])
	}
	_, err := tryRender("clusterNetworks: [not-a-prefix]\n")
	require.ErrorContains(t, err, "clusterNetworks")
}

// TestLimitsRender: the limits reach the proxies and the IPAM, and the
// schema refuses a limit that is not positive.
func TestLimitsRender(t *testing.T) {
	values := "services: {enabled: true, source: kubernetes, limits: {services: 7, connectionsPerClient: 9}}\n" +
		"proxy: {limits: {connectionsPerClient: 5}}\nipam: {limits: {conduits: 3, addressesPerNode: 11}}\n"
	for _, e := range proxyEnv(t, values) {
		require.Equal(t, "5", e["NSM_MAX_CONNECTIONS_PER_CLIENT"])
		require.Equal(t, "7", e["NSM_SERVICES_MAX"])
		require.Equal(t, "9", e["NSM_SERVICE_MAX_CONNECTIONS_PER_CLIENT"])
	}
	m := render(t, values)
	_, bins := loadReference(t)
	require.Len(t, m.statefulSets, 1)
	e := env(container(t, m.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
	require.Equal(t, "3", e["IPAM_MAX_CONDUITS"])
	require.Equal(t, "11", e["IPAM_MAX_CHILDREN_PER_NODE"])
	_, err := tryRender("proxy: {limits: {connectionsPerClient: 0}}\n")
	require.ErrorContains(t, err, "connectionsPerClient")
}

// TestServerIDsDerivedAsCallerRules: the proxies hold the IPAM and the
// configuration server to the IDs the chart gives those pods, derived as
// the servers' rules of their callers are (the NSP authorizes the IPAM by
// the very rules the proxies expect of it), in every identity scheme; none
// in plain text.
func TestServerIDsDerivedAsCallerRules(t *testing.T) {
	for _, scheme := range []string{"any", "pod", "serviceAccount"} {
		t.Run(scheme, func(t *testing.T) {
			values := "spire: {idScheme: " + scheme + "}\n"
			m := render(t, values)
			_, bins := loadReference(t)
			ipamEnv := env(container(t, m.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
			nspEnv := env(container(t, m.deployments[0].Spec.Template.Spec, "nsp"), bins["nsp"])
			for _, e := range proxyEnv(t, values) {
				require.NotEmpty(t, e["NSM_IPAM_SERVER_IDS"])
				require.True(t, strings.HasSuffix(nspEnv["NSP_AUTHORIZED_IDS"], ","+e["NSM_IPAM_SERVER_IDS"]) ||
					nspEnv["NSP_AUTHORIZED_IDS"] == e["NSM_IPAM_SERVER_IDS"],
					"the IPAM's ID as the NSP authorizes it: %q in %q", e["NSM_IPAM_SERVER_IDS"], nspEnv["NSP_AUTHORIZED_IDS"])
				require.Equal(t, e["NSM_NSP_SERVER_IDS"], ipamEnv["IPAM_NSP_SERVER_IDS"])
				matches := func(id string) bool {
					for _, r := range strings.Split(e["NSM_NSP_SERVER_IDS"], ",") {
						if ok, _ := path.Match(r, id); ok {
							return true
						}
					}
					return false
				}
				if scheme != "serviceAccount" {
					require.True(t, matches("/ns/"+namespace+"/pod/nsp-trench-a-6d4cf56db6-x2k9p"), "the NSP's pods")
				}
				if scheme != "pod" {
					require.True(t, matches("/ns/"+namespace+"/sa/nsp-trench-a"), "the NSP's account")
				}
				require.False(t, matches("/ns/"+namespace+"/sa/proxy-trench-a"))
			}
		})
	}
	for _, e := range proxyEnv(t, "insecure: true\n") {
		require.Empty(t, e["NSM_IPAM_SERVER_IDS"], "the default, from the reference: none set")
	}
}

// TestSysctlInitPinnedByDigest: with a digest the init container's image
// is pulled by it; a malformed digest is refused.
func TestSysctlInitPinnedByDigest(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	m := render(t, "images: {sysctlInit: {repository: registry.example/busybox, tag: \"1.36\", digest: "+d+"}}\n")
	for _, ds := range m.daemonSets {
		require.Equal(t, "registry.example/busybox:1.36@"+d, ds.Spec.Template.Spec.InitContainers[0].Image)
	}
	_, err := tryRender("images: {sysctlInit: {repository: busybox, digest: latest}}\n")
	require.ErrorContains(t, err, "digest")
}

// TestNetworkPolicies: each component's pods take the gRPC of this release's
// pods only, and metrics only from metricsFrom; the value turns them off.
func TestNetworkPolicies(t *testing.T) {
	m := render(t, "")
	require.Len(t, m.policies, 3)
	ipam := m.policies["ipam-trench-a"]
	require.NotNil(t, ipam)
	require.Len(t, ipam.Spec.Ingress, 1, "gRPC only: metrics closed without metricsFrom")
	require.Equal(t, "7777", ipam.Spec.Ingress[0].Ports[0].Port.String())
	require.Equal(t, map[string]string{"app.kubernetes.io/instance": "causeway", "causeway.io/trench": "trench-a"},
		ipam.Spec.Ingress[0].From[0].PodSelector.MatchLabels)
	proxy := m.policies["proxy-load-balancer-trench-a"]
	require.NotNil(t, proxy)
	require.Empty(t, proxy.Spec.Ingress, "a proxy takes nothing on its pod network")

	m = render(t, "networkPolicy: {metricsFrom: [{namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: monitoring}}}]}\n")
	proxy = m.policies["proxy-load-balancer-trench-a"]
	require.Len(t, proxy.Spec.Ingress, 1)
	require.Equal(t, "9091", proxy.Spec.Ingress[0].Ports[0].Port.String())
	require.Equal(t, "monitoring", proxy.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"])

	require.Empty(t, render(t, "networkPolicy: {enabled: false}\n").policies)
}

// TestProxiesHeldToTheirOwnSlices: with the kubernetes source the chart
// ships a ValidatingAdmissionPolicy (and its Deny binding) that matches the
// proxies' account only and holds every slice it writes, before and after,
// to Causeway's managed-by, this release's conduits and the node of its
// bound token; with services.namespaces the writes are granted by Roles in
// those namespaces only, and the policy checks the namespace too. The
// expressions use only what Kubernetes' CEL offers (request, object,
// oldObject, variables, has, in, ==, ?:); they are not compiled here:
// the module does not carry a CEL library.
func TestProxiesHeldToTheirOwnSlices(t *testing.T) {
	m := render(t, apiValues)
	require.Len(t, m.admission, 1)
	require.Len(t, m.admissionBnd, 1)
	vap, bnd := m.admission[0], m.admissionBnd[0]
	require.Equal(t, vap.Name, bnd.Spec.PolicyName)
	require.Equal(t, "Deny", string(bnd.Spec.ValidationActions[0]))
	require.Equal(t, "Fail", string(*vap.Spec.FailurePolicy))
	require.Equal(t, "request.userInfo.username == 'system:serviceaccount:"+namespace+":proxy-trench-a'",
		vap.Spec.MatchConditions[0].Expression)
	rules := vap.Spec.MatchConstraints.ResourceRules[0]
	require.Equal(t, []string{"endpointslices"}, rules.Resources)
	require.ElementsMatch(t, []string{"CREATE", "UPDATE", "DELETE"}, []string{string(rules.Operations[0]), string(rules.Operations[1]), string(rules.Operations[2])})
	var all string
	for _, v := range vap.Spec.Variables {
		all += v.Expression + "\n"
	}
	for _, v := range vap.Spec.Validations {
		all += v.Expression + "\n"
	}
	for _, want := range []string{
		"request.userInfo.extra['authentication.kubernetes.io/node-name'][0]",
		"object.metadata.labels['endpointslice.kubernetes.io/managed-by'] == 'proxy.causeway-net.github.io'",
		"oldObject.metadata.labels['endpointslice.kubernetes.io/managed-by'] == 'proxy.causeway-net.github.io'",
		"in ['lb-a.trench-a." + namespace + "','lb-b.trench-a." + namespace + "']",
		"oldObject.metadata.labels['causeway-net.github.io/node'] == variables.node",
		"(object == null || (",
		"(oldObject == null || (",
	} {
		require.Contains(t, all, want)
	}
	require.Equal(t, strings.Count(all, "("), strings.Count(all, ")"), "balanced parentheses")
	require.Equal(t, strings.Count(all, "["), strings.Count(all, "]"), "balanced brackets")
	roles, _ := otherRoles(m)
	require.Empty(t, roles, "no namespace list: no Roles")

	m = render(t, strings.Replace(apiValues, "source: kubernetes,", "source: kubernetes, namespaces: [shop, web],", 1))
	roles, bindings := otherRoles(m)
	require.Len(t, roles, 2)
	require.Len(t, bindings, 2)
	for _, r := range roles {
		require.Contains(t, []string{"shop", "web"}, r.Namespace)
		require.Equal(t, []string{"get", "create", "update", "delete"}, r.Rules[0].Verbs)
	}
	for _, rule := range m.clusterRoles[namespace+"-proxy-trench-a-services"].Rules {
		require.NotContains(t, rule.Verbs, "create", "the ClusterRole only reads")
	}
	last := m.admission[0].Spec.Validations[len(m.admission[0].Spec.Validations)-1]
	require.Equal(t, "request.namespace in ['shop','web']", last.Expression)
	for _, ds := range m.daemonSets {
		_, bins := loadReference(t)
		require.Equal(t, "shop,web", env(container(t, ds.Spec.Template.Spec, "proxy"), bins["proxy"])["NSM_SERVICES_NAMESPACES"])
	}

	require.Empty(t, render(t, "").admission, "no kubernetes source: no policy")
}
