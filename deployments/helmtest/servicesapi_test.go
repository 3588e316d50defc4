package helmtest

import (
	"testing"

	"github.com/stretchr/testify/require"
	rbacv1 "k8s.io/api/rbac/v1"
)

// apiValues turns services on with the kubernetes source, on two conduits.
const apiValues = `services: {enabled: true, source: kubernetes, prefixes: [10.96.0.0/16, "fd00:96::/112"]}
conduits: [{name: lb-a}, {name: lb-b}]`

// TestServicesFromAPIRender renders the kubernetes source: every conduit's
// proxies get the source, the prefixes and the account's token, no
// services file; one ClusterRole grants what the source reads and writes,
// bound to the proxies' account only.
func TestServicesFromAPIRender(t *testing.T) {
	m := render(t, apiValues)
	checkInstall(t, m, "trench-a", "dualstack", []string{"lb-a", "lb-b"})
	_, bins := loadReference(t)
	require.Empty(t, servicesConfigMaps(m))
	for i, ds := range m.daemonSets {
		spec := ds.Spec.Template.Spec
		e := env(container(t, spec, "proxy"), bins["proxy"])
		require.Equal(t, "kubernetes", e["NSM_SERVICES_SOURCE"], ds.Name)
		require.Equal(t, "10.96.0.0/16,fd00:96::/112", e["NSM_SERVICE_PREFIXES"])
		require.Empty(t, e["NSM_SERVICES_FILE"])
		require.Equal(t, "nftables", e["NSM_SERVICE_PROVIDER"])
		require.Equal(t, []string{"lb-a", "lb-b"}[i], e["NSM_CONDUIT"])
		require.Empty(t, e["NSM_SERVICES_PROXY_NAME"], "the proxy's default: <conduit>.<trench>.<namespace>")
		require.Equal(t, namespace, e["NSM_NAMESPACE"])
		require.True(t, *spec.AutomountServiceAccountToken, "the source needs the account's token")
		for _, v := range spec.Volumes {
			require.Nil(t, v.ConfigMap, "volume %s", v.Name)
		}
	}

	name := namespace + "-proxy-trench-a-services"
	require.Len(t, m.clusterRoles, 2, "the proxies' and the IPAM's (its watch of deleted nodes)")
	role := m.clusterRoles[name]
	require.NotNil(t, role, "ClusterRole %s", name)
	require.Equal(t, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"services", "pods"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"},
			Verbs: []string{"get", "create", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, role.Rules, "least privilege: no secrets, no wildcard, no other resource")
	require.Len(t, m.bindings, 2, "the proxies' and the IPAM's")
	b := m.bindings[name]
	require.NotNil(t, b)
	require.Equal(t, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name}, b.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: "proxy-trench-a", Namespace: namespace}}, b.Subjects)
	require.Equal(t, m.daemonSets[0].Spec.Template.Spec.ServiceAccountName, b.Subjects[0].Name)
}

// TestServicesFromAPIOff: with the file source, services off, or by
// default, no RBAC object is rendered and no proxy mounts a token.
func TestServicesFromAPIOff(t *testing.T) {
	fileValues, _ := servicesValues(t, nil)
	for name, v := range map[string]string{
		"default":      "",
		"file":         fileValues,
		"not enabled":  "services: {enabled: false, source: kubernetes}",
		"only enabled": "services: {source: kubernetes}",
	} {
		t.Run(name, func(t *testing.T) {
			// The IPAM's watch of deleted nodes aside (TestIPAMWithoutNodesWatch).
			m := render(t, v+"\nipam: {freeDeletedNodes: false}")
			require.Empty(t, m.clusterRoles)
			require.Empty(t, m.bindings)
			for _, spec := range allPods(m) {
				require.False(t, *spec.AutomountServiceAccountToken)
				for _, c := range spec.Containers {
					for _, e := range c.Env {
						require.NotEqual(t, "NSM_SERVICES_SOURCE", e.Name)
					}
				}
			}
		})
	}
}

// TestServicesFromAPISchemaRejects: a bad source or prefix, and a
// services file beside the kubernetes source, are refused at install.
func TestServicesFromAPISchemaRejects(t *testing.T) {
	for _, tc := range []struct{ values, want string }{
		{"services: {source: api}", "/services/source"},
		{"services: {enabled: true, source: kubernetes, prefixes: [10.96.0.0]}", "/services/prefixes/0"},
		{"services: {enabled: true, source: kubernetes, prefixes: [10.0.0.0/4]}", "/services/prefixes/0"},
		{"services: {enabled: true, source: kubernetes, prefixes: \"10.96.0.0/16\"}", "/services/prefixes"},
		{"services: {enabled: true, source: kubernetes}\nconduits: [{name: a, servicesFile: {services: []}}]",
			"conduits[0] (a) has a servicesFile while services.source is kubernetes"},
	} {
		_, err := tryRender(tc.values)
		require.Error(t, err, tc.values)
		require.Contains(t, err.Error(), tc.want, "%s: the message should name the value", tc.values)
	}
}
