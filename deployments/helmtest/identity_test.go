package helmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestTargetIdentityRender: with the kubernetes source the proxies publish
// a target only for the pod its proved ID names, under spire.idScheme
// unless services.targetIdentity says otherwise (never in insecure mode);
// a conduit's targetIDs reach its proxies.
func TestTargetIdentityRender(t *testing.T) {
	api := "services: {enabled: true, source: kubernetes}\n"
	for _, e := range proxyEnv(t, api) {
		require.Equal(t, "any", e["NSM_TARGET_ID_SCHEME"])
		require.Equal(t, releaseTargets, e["NSM_TARGET_IDS"])
	}
	for _, e := range proxyEnv(t, api+"spire: {idScheme: pod}\nconduits: [{name: lb, targetIDs: [/ns/shop/sa/web, /ns/bank/sa/*]}]\n") {
		require.Equal(t, "pod", e["NSM_TARGET_ID_SCHEME"])
		require.Equal(t, "/ns/shop/sa/web,/ns/bank/sa/*", e["NSM_TARGET_IDS"])
	}
	for _, e := range proxyEnv(t, "services: {enabled: true, source: kubernetes, targetIdentity: \"off\"}\n") {
		require.Equal(t, "off", e["NSM_TARGET_ID_SCHEME"])
	}
	for _, e := range proxyEnv(t, api+"insecure: true\n") {
		require.Equal(t, "off", e["NSM_TARGET_ID_SCHEME"], "the binary's default: nothing to prove with")
	}
	_, err := tryRender("services: {targetIdentity: node}\n")
	require.Error(t, err)
}

// releaseTargets are the targets a conduit admits when it lists none: the
// pods of the release's namespace, in both ID forms.
const releaseTargets = "/ns/causeway-test/pod/*,/ns/causeway-test/sa/*"

// TestTargetIDsDenyByDefault: a conduit that lists no targetIDs admits
// only the pods of the release's namespace, in both ID forms whatever
// spire.idScheme (the targets are not the chart's pods: a cluster may name
// them in the other form), in spire.trustDomain when it is set; a list
// replaces it (the patterns of every namespace widen it), an empty list
// checks nothing, and insecure mode sets nothing (nothing is proved).
func TestTargetIDsDenyByDefault(t *testing.T) {
	for _, values := range []string{"", "spire: {idScheme: pod}\n", "spire: {idScheme: serviceAccount}\n",
		"services: {enabled: true, source: kubernetes}\n", "spire: {nodeIDs: false}\n"} {
		for _, e := range proxyEnv(t, values) {
			require.Equal(t, releaseTargets, e["NSM_TARGET_IDS"], values)
		}
	}
	for _, e := range proxyEnv(t, "spire: {trustDomain: example.org}\n") {
		require.Equal(t, "spiffe://example.org/ns/causeway-test/pod/*,spiffe://example.org/ns/causeway-test/sa/*", e["NSM_TARGET_IDS"])
	}
	two := "conduits: [{name: a}, {name: b, targetIDs: [/ns/*/pod/*, /ns/*/sa/*]}, {name: c, targetIDs: []}]\n"
	byConduit := map[string]string{}
	m := render(t, two)
	_, bins := loadReference(t)
	for _, ds := range m.daemonSets {
		e := env(container(t, ds.Spec.Template.Spec, "proxy"), bins["proxy"])
		byConduit[e["NSM_CONDUIT"]] = e["NSM_TARGET_IDS"]
	}
	require.Equal(t, map[string]string{"a": releaseTargets, "b": "/ns/*/pod/*,/ns/*/sa/*", "c": ""}, byConduit)
	for _, e := range proxyEnv(t, "insecure: true\n") {
		require.Empty(t, e["NSM_TARGET_IDS"], "the binary's default: nothing to prove with")
	}
	_, err := tryRender("conduits: [{name: a, targetIDs: [shop]}]\n")
	require.Error(t, err, "a rule that is neither an ID nor a path")
}

// TestNodeIDsRender: spire.nodeIDs (on by default) ships the proxies'
// per-node ClusterSPIFFEID (and takes NSM's pod labels off them), admits
// that form at the IPAM and the configuration server, and holds the
// proxies to their node at the IPAM, the replicas excepted; off, or in
// insecure mode, none of it.
func TestNodeIDsRender(t *testing.T) {
	m := render(t, "")
	var templates []string
	for _, o := range m.clusterSPIFFEIDs {
		spec := o["spec"].(map[string]any)
		templates = append(templates, spec["spiffeIDTemplate"].(string))
	}
	require.Contains(t, templates, "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}/node/{{ .PodSpec.NodeName }}")
	for _, ds := range m.daemonSets {
		require.NotContains(t, ds.Spec.Template.Labels, "spiffe.io/spiffe-id")
	}
	_, bins := loadReference(t)
	e := env(container(t, m.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
	require.Equal(t, "true", e["IPAM_NODE_BOUND"])
	require.Contains(t, e["IPAM_AUTHORIZED_IDS"], "/sa/proxy-")
	require.Regexp(t, `/ns/[a-z-]+/sa/proxy-[a-z0-9-]+/node/\*`, e["IPAM_AUTHORIZED_IDS"])
	require.Equal(t, "/ns/causeway-test/sa/ipam-trench-a,/ns/causeway-test/pod/ipam-trench-a-[0-9]", e["IPAM_UNBOUND_IDS"])

	for _, values := range []string{"spire: {nodeIDs: false}\n", "insecure: true\n"} {
		off := render(t, values)
		e = env(container(t, off.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
		require.Equal(t, "false", e["IPAM_NODE_BOUND"], values)
		require.NotRegexp(t, `/node/`, e["IPAM_AUTHORIZED_IDS"], values)
		require.Empty(t, off.clusterSPIFFEIDs, values)
		for _, ds := range off.daemonSets {
			require.Equal(t, "true", ds.Spec.Template.Labels["spiffe.io/spiffe-id"], values)
		}
	}
}
