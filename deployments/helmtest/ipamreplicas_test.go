package helmtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkIPAMReplicas checks an IPAM on the Kubernetes store (e: its
// environment): no volume; each replica named by its pod, reachable by the
// others at IPAM_LEADER_ADDRESS through a headless Service that publishes
// pods before they are ready; a Role in the release's namespace that grants
// the records and the one Lease, bound to the pods' account; replicas
// spread over nodes and a PodDisruptionBudget.
func checkIPAMReplicas(t *testing.T, m *manifests, e map[string]string) {
	t.Helper()
	sts := m.statefulSets[0]
	spec := sts.Spec.Template.Spec
	pods := labels.Set(sts.Spec.Template.Labels)
	require.Empty(t, sts.Spec.VolumeClaimTemplates, "no volume")
	require.Equal(t, "<metadata.name>", e["IPAM_IDENTITY"], "a replica is named by its pod")
	require.Equal(t, "<metadata.namespace>", e["IPAM_KUBE_NAMESPACE"])
	require.True(t, *spec.AutomountServiceAccountToken, "the store is on the API")

	// The leader of the moment, as a standby finds it.
	addr := strings.ReplaceAll(e["IPAM_LEADER_ADDRESS"], "{identity}", sts.Name+"-1")
	peers, ok := m.services[sts.Spec.ServiceName]
	require.True(t, ok, "the StatefulSet's Service %s", sts.Spec.ServiceName)
	require.Equal(t, sts.Name+"-1."+peers.Name+"."+namespace+".svc:"+e["IPAM_PORT"], addr, "the pod's DNS name under its StatefulSet's Service")
	require.Equal(t, corev1.ClusterIPNone, peers.Spec.ClusterIP, "headless: a name per pod")
	require.True(t, peers.Spec.PublishNotReadyAddresses, "a standby is ready once it reaches the leader: the leader's name must not wait for readiness")
	require.True(t, labels.SelectorFromSet(peers.Spec.Selector).Matches(pods))

	// Least privilege: a Role (no ClusterRole for the store), bound to the
	// pods' account, granting the records and the Lease the pods name.
	role, ok := m.roles[sts.Name]
	require.True(t, ok, "the IPAM's Role")
	rb, ok := m.roleBindings[sts.Name]
	require.True(t, ok, "its RoleBinding")
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: namespace}}, rb.Subjects)
	for _, res := range []string{"ipampools", "ipamblocks"} {
		for _, verb := range []string{"get", "list", "create", "update", "delete"} {
			require.True(t, grants(role.Rules, "ipam.causeway.net", res, "", verb), "%s %s", verb, res)
		}
	}
	lease := e["IPAM_LEADER_LEASE_NAME"]
	require.NotEmpty(t, lease)
	for _, verb := range []string{"get", "create", "update"} {
		require.True(t, grants(role.Rules, "coordination.k8s.io", "leases", lease, verb), "%s the Lease", verb)
	}
	require.False(t, grants(role.Rules, "coordination.k8s.io", "leases", "another-lease", "update"), "only its own Lease")
	for _, r := range role.Rules {
		require.NotContains(t, r.Verbs, "*")
		require.NotContains(t, r.Resources, "*")
		require.NotContains(t, r.Verbs, "patch")
	}

	checkIPAMNodesRole(t, m, e, spec)

	// Spread over nodes, and drained one at a time.
	aa := spec.Affinity.PodAntiAffinity
	require.NotNil(t, aa)
	terms := aa.RequiredDuringSchedulingIgnoredDuringExecution
	for _, w := range aa.PreferredDuringSchedulingIgnoredDuringExecution {
		terms = append(terms, w.PodAffinityTerm)
	}
	require.Len(t, terms, 1)
	require.Equal(t, "kubernetes.io/hostname", terms[0].TopologyKey)
	sel, err := metav1.LabelSelectorAsSelector(terms[0].LabelSelector)
	require.NoError(t, err)
	require.True(t, sel.Matches(pods))
	if *sts.Spec.Replicas > 1 {
		pdb, ok := m.pdbs[sts.Name]
		require.True(t, ok, "a PodDisruptionBudget")
		require.Equal(t, 1, pdb.Spec.MaxUnavailable.IntValue())
		require.True(t, labels.SelectorFromSet(pdb.Spec.Selector.MatchLabels).Matches(pods))
	}
}

// grants reports whether rules allow verb on resource (named name; ""
// for any) of group.
func grants(rules []rbacv1.PolicyRule, group, resource, name, verb string) bool {
	for _, r := range rules {
		if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && slices.Contains(r.Verbs, verb) &&
			(len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, name)) {
			return true
		}
	}
	return false
}

// TestIPAMStoreValues: one replica stays on its claim unless the store is
// asked for; kubernetes with one replica has no claim and no budget; more
// replicas on a file are refused, naming the values; required
// anti-affinity never shares a node.
func TestIPAMStoreValues(t *testing.T) {
	one := render(t, "ipam: {store: kubernetes}")
	require.Empty(t, one.statefulSets[0].Spec.VolumeClaimTemplates)
	require.Equal(t, int32(1), *one.statefulSets[0].Spec.Replicas)
	require.Empty(t, one.pdbs, "no budget for a single replica")
	require.Contains(t, one.roles, one.statefulSets[0].Name)

	_, err := tryRender("ipam: {replicas: 2, store: bolt}")
	require.ErrorContains(t, err, "ipam.replicas is 2 with ipam.store bolt")
	for values, want := range map[string]string{
		"ipam: {replicas: 0}":             "/ipam/replicas",
		"ipam: {store: etcd}":             "/ipam/store",
		"ipam: {antiAffinity: sometimes}": "/ipam/antiAffinity",
		"ipam: {leaseDuration: 15}":       "/ipam/leaseDuration",
	} {
		_, err := tryRender(values)
		require.ErrorContains(t, err, want, values)
	}

	hard := render(t, "ipam: {replicas: 3, antiAffinity: required}")
	aa := hard.statefulSets[0].Spec.Template.Spec.Affinity.PodAntiAffinity
	require.Len(t, aa.RequiredDuringSchedulingIgnoredDuringExecution, 1)
	require.Empty(t, aa.PreferredDuringSchedulingIgnoredDuringExecution)
}

// checkIPAMNodesRole checks the IPAM's watch of deleted nodes (e: its
// environment, spec: its pods): read-only on nodes, the one cluster-wide
// grant of its account, with its token mounted.
func checkIPAMNodesRole(t *testing.T, m *manifests, e map[string]string, spec corev1.PodSpec) {
	t.Helper()
	require.Equal(t, "true", e["IPAM_FREE_DELETED_NODES"])
	require.True(t, *spec.AutomountServiceAccountToken, "the nodes' watch needs the account's token")
	var nodeRoles []string
	for name, b := range m.bindings {
		if slices.Contains(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Name: spec.ServiceAccountName, Namespace: namespace}) {
			nodeRoles = append(nodeRoles, name)
			cr, ok := m.clusterRoles[b.RoleRef.Name]
			require.True(t, ok, "ClusterRole %s", b.RoleRef.Name)
			require.Equal(t, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get", "list", "watch"}}}, cr.Rules)
		}
	}
	require.Len(t, nodeRoles, 1, "one cluster-wide binding of the IPAM's account")
}
