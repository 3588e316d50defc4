package helmtest

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// TestIPAMUninstallHook: by default helm uninstall leaves the Kubernetes
// store's records (no hook); with ipam.deleteOnUninstall a post-delete Job
// runs `ipam delete-records` from the IPAM's image on the release's trench
// and Lease, under an account that may list and delete the records and use
// that one Lease, nothing else. The bbolt store gets no hook (its claim
// goes with the StatefulSet).
func TestIPAMUninstallHook(t *testing.T) {
	// The proxies' upgrade hook (on by default) left out: the IPAM's
	// hooks are the only ones rendered.
	const noUpgrade = "\nproxy: {upgrade: {enabled: false}}"
	require.Empty(t, renderHooks(t, "ipam: {replicas: 3}"+noUpgrade).jobs, "the records stay by default")
	require.Empty(t, renderHooks(t, "ipam: {deleteOnUninstall: true}"+noUpgrade).jobs, "no hook on the bbolt store")
	_, err := tryRender("ipam: {deleteOnUninstall: yes please}")
	require.ErrorContains(t, err, "/ipam/deleteOnUninstall")

	values := "ipam: {replicas: 3, deleteOnUninstall: true, leaseDuration: 20s}" + noUpgrade
	m := render(t, values)
	h := renderHooks(t, values)
	require.Len(t, h.jobs, 1)
	require.Len(t, h.accounts, 1)
	require.Len(t, h.roles, 1)
	require.Len(t, h.bindings, 1)
	job, sa, role, rb := h.jobs[0], h.accounts[0], h.roles[0], h.bindings[0]
	for _, name := range []string{"Job/" + job.Name, "ServiceAccount/" + sa.Name, "Role/" + role.Name, "RoleBinding/" + rb.Name} {
		require.Equal(t, []release.HookEvent{release.HookPostDelete}, h.events[name], "%s runs after helm uninstall only", name)
	}
	for _, o := range []map[string]string{sa.Annotations, role.Annotations, rb.Annotations} {
		require.Less(t, o["helm.sh/hook-weight"], job.Annotations["helm.sh/hook-weight"], "the account exists before the Job")
	}

	// The IPAM's own trench and Lease, from its image.
	sts := m.statefulSets[0]
	ipam := container(t, sts.Spec.Template.Spec, "ipam")
	_, bins := loadReference(t)
	ipamEnv := env(ipam, bins["ipam"])
	spec := job.Spec.Template.Spec
	c := container(t, spec, "delete-records")
	require.Equal(t, ipam.Image, c.Image)
	require.Empty(t, c.Command, "the image's entrypoint, the ipam binary")
	require.Equal(t, "delete-records", c.Args[0])
	require.Contains(t, c.Args, "-force", "the trench's proxies go with it")
	wait, err := time.ParseDuration(c.Args[slices.Index(c.Args, "-wait")+1])
	require.NoError(t, err)
	require.Greater(t, wait, 2*20*time.Second, "a killed replica's Lease ends in time")
	checkEnvKnown(t, c, bins["ipam"])
	e := env(c, bins["ipam"])
	for _, v := range []string{"IPAM_TRENCH_NAME", "IPAM_KUBE_NAMESPACE", "IPAM_LEADER_LEASE_NAME"} {
		require.Equal(t, ipamEnv[v], e[v], v)
	}
	require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	sc := c.SecurityContext
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.True(t, *sc.RunAsNonRoot)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)

	// Least privilege.
	require.Equal(t, sa.Name, spec.ServiceAccountName)
	require.Equal(t, rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}, rb.RoleRef)
	require.Equal(t, []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: namespace}}, rb.Subjects)
	lease := e["IPAM_LEADER_LEASE_NAME"]
	for _, res := range []string{"ipampools", "ipamblocks"} {
		for _, verb := range []string{"list", "delete"} {
			require.True(t, grants(role.Rules, "ipam.causeway.net", res, "", verb), "%s %s", verb, res)
		}
		for _, verb := range []string{"create", "update", "patch"} {
			require.False(t, grants(role.Rules, "ipam.causeway.net", res, "", verb), "no %s on %s", verb, res)
		}
	}
	for _, verb := range []string{"get", "create", "update", "delete"} {
		require.True(t, grants(role.Rules, "coordination.k8s.io", "leases", lease, verb), "%s the Lease", verb)
	}
	for _, verb := range []string{"update", "delete"} {
		require.False(t, grants(role.Rules, "coordination.k8s.io", "leases", "another-lease", verb), "no %s of another Lease", verb)
	}
	for _, r := range role.Rules {
		require.NotContains(t, r.Verbs, "*")
		require.NotContains(t, r.Resources, "*")
	}
}
