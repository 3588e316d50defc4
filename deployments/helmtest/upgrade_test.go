package helmtest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/release"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// hooks are the rendered hook objects of one install.
type hooks struct {
	accounts []*corev1.ServiceAccount
	roles    []*rbacv1.Role
	bindings []*rbacv1.RoleBinding
	jobs     []*batchv1.Job
	events   map[string][]release.HookEvent // by kind/name
	logs     map[string][]release.HookOutputLogPolicy
}

// renderHooks renders the chart's hooks (Helm 3's SDK; a dry run keeps
// them apart from the manifests) and decodes them strictly.
func renderHooks(t *testing.T, values string) *hooks {
	t.Helper()
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(values), &vals))
	rel, err := installHelm3(vals)
	require.NoError(t, err)
	h := &hooks{events: map[string][]release.HookEvent{}, logs: map[string][]release.HookOutputLogPolicy{}}
	for _, hk := range rel.Hooks {
		obj := h.add(t, hk.Kind)
		require.NoError(t, yaml.UnmarshalStrict([]byte(hk.Manifest), obj), "%s %s:\n%s", hk.Kind, hk.Name, hk.Manifest)
		h.events[hk.Kind+"/"+hk.Name] = append(h.events[hk.Kind+"/"+hk.Name], hk.Events...)
		h.logs[hk.Kind+"/"+hk.Name] = append(h.logs[hk.Kind+"/"+hk.Name], hk.OutputLogPolicies...)
	}
	return h
}

// add makes a new hook object of kind, listed in h.
func (h *hooks) add(t *testing.T, kind string) any {
	switch kind {
	case "ServiceAccount":
		h.accounts = append(h.accounts, &corev1.ServiceAccount{})
		return h.accounts[len(h.accounts)-1]
	case "Role":
		h.roles = append(h.roles, &rbacv1.Role{})
		return h.roles[len(h.roles)-1]
	case "RoleBinding":
		h.bindings = append(h.bindings, &rbacv1.RoleBinding{})
		return h.bindings[len(h.bindings)-1]
	case "Job":
		h.jobs = append(h.jobs, &batchv1.Job{})
		return h.jobs[len(h.jobs)-1]
	}
	t.Fatalf("unexpected hook kind %s", kind)
	return nil
}

// TestProxyUpdateStrategy: by default Kubernetes does not replace the
// proxies on a new template (OnDelete) and the chart's upgrade Job moves
// them, its report a hook; RollingUpdate gives them back to Kubernetes,
// without either.
func TestProxyUpdateStrategy(t *testing.T) {
	m := render(t, twoConduits().values)
	for _, ds := range m.daemonSets {
		require.Equal(t, appsv1.OnDeleteDaemonSetStrategyType, ds.Spec.UpdateStrategy.Type, ds.Name)
		require.Nil(t, ds.Spec.UpdateStrategy.RollingUpdate, ds.Name)
	}
	require.Len(t, m.jobs, 1, "the upgrade Job by default")
	require.Len(t, renderHooks(t, twoConduits().values).jobs, 1, "its report by default")
	for _, values := range []string{"proxy: {updateStrategy: RollingUpdate}", "proxy: {upgrade: {enabled: false}}"} {
		require.Empty(t, render(t, values).jobs, values)
		require.Empty(t, renderHooks(t, values).jobs, values)
	}
	m = render(t, "proxy: {updateStrategy: RollingUpdate}")
	require.Equal(t, appsv1.RollingUpdateDaemonSetStrategyType, m.daemonSets[0].Spec.UpdateStrategy.Type)
	require.Equal(t, appsv1.OnDeleteDaemonSetStrategyType, render(t, "proxy: {upgrade: {enabled: false}}").daemonSets[0].Spec.UpdateStrategy.Type,
		"the upgrade turned off keeps OnDelete (causeway-upgrade run by hand)")

	_, err := tryRender("proxy: {updateStrategy: Recreate}")
	require.ErrorContains(t, err, "updateStrategy")
	_, err = tryRender("proxy: {upgrade: {readyTimeout: soon}}")
	require.ErrorContains(t, err, "readyTimeout")
}

// TestUpgradeJob: every release has a Job (not a hook, named after the
// revision, so that each upgrade and rollback makes one and Helm's wait
// sees the DaemonSets it updates) that runs causeway-upgrade from the new
// proxy image, under an account that may do what the upgrade does in the
// release's namespace and nothing else; its selector picks every proxy
// DaemonSet of the release and nothing else; it waits for the release's
// other movers, itself left out.
func TestUpgradeJob(t *testing.T) {
	values := twoConduits().values + "\nproxy: {upgrade: {readyTimeout: 90s}}"
	m := render(t, values)
	require.Len(t, m.jobs, 1)
	job := m.jobs[0]
	require.Equal(t, "proxy-mover-red-1", job.Name, "named after the trench and the revision")
	require.NotContains(t, job.Annotations, "helm.sh/hook", "a Job of the release, not a hook")
	spec := job.Spec.Template.Spec
	sa, ok := m.accounts[spec.ServiceAccountName]
	require.True(t, ok, "its account is the release's: %s", spec.ServiceAccountName)
	require.NotContains(t, sa.Annotations, "helm.sh/hook")
	requireRoleOf(t, m.roles, m.roleBindings, sa.Name, map[string][]string{
		"apps/daemonsets":          {"get", "list"},
		"apps/controllerrevisions": {"list"},
		"/pods":                    {"delete", "get", "list", "patch", "watch"},
	})

	// The Job: the proxy's image, the upgrade binary, no retry, the
	// restricted security context.
	require.Equal(t, int32(0), *job.Spec.BackoffLimit, "a stop is not retried by itself")
	require.Equal(t, corev1.RestartPolicyNever, spec.RestartPolicy)
	c := container(t, spec, "upgrade")
	proxy := container(t, m.daemonSets[0].Spec.Template.Spec, "proxy")
	require.Equal(t, proxy.Image, c.Image, "the upgrade runs from the new proxy image")
	_, bins := loadReference(t)
	b := bins["causeway-upgrade"]
	require.Equal(t, []string{b.image}, c.Command)
	checkEnvKnown(t, c, b)
	e := env(c, b)
	require.Equal(t, "<metadata.namespace>", e["UPGRADE_NAMESPACE"])
	require.Equal(t, "<metadata.name>", e["UPGRADE_POD"])
	require.Equal(t, "90s", e["UPGRADE_READY_TIMEOUT"])
	requireRestricted(t, c)

	sel, err := labels.Parse(e["UPGRADE_SELECTOR"])
	require.NoError(t, err)
	require.Len(t, m.daemonSets, 2)
	for _, ds := range m.daemonSets {
		require.True(t, sel.Matches(labels.Set(ds.Labels)), "the selector %q picks %s", sel, ds.Name)
	}
	for _, s := range m.statefulSets {
		require.False(t, sel.Matches(labels.Set(s.Labels)), "the selector %q leaves %s alone", sel, s.Name)
	}
	for _, d := range m.deployments {
		require.False(t, sel.Matches(labels.Set(d.Labels)), "the selector %q leaves %s alone", sel, d.Name)
	}
	require.True(t, strings.Contains(sel.String(), "app.kubernetes.io/instance=causeway"), fmt.Sprint(sel))

	runs, err := labels.Parse(e["UPGRADE_RUNS"])
	require.NoError(t, err)
	require.True(t, runs.Matches(labels.Set(job.Spec.Template.Labels)), "the runs %q are the movers' pods", runs)
	for _, ds := range m.daemonSets {
		require.False(t, runs.Matches(labels.Set(ds.Spec.Template.Labels)), "the runs %q are not %s's pods", runs, ds.Name)
	}
	for _, r := range renderHooks(t, values).jobs {
		require.False(t, runs.Matches(labels.Set(r.Spec.Template.Labels)), "the runs %q are not the report's pods", runs)
	}
}

// TestUpgradeReport: after every helm upgrade (or rollback) a hook Job
// follows the release's upgrade Job: helm prints its log (the upgrade's:
// what it did to each pod, and why) and fails when the upgrade failed.
// Its account may read that Job, list pods and read their logs.
func TestUpgradeReport(t *testing.T) {
	values := twoConduits().values
	mover := render(t, values).jobs[0]
	h := renderHooks(t, values)
	require.Len(t, h.jobs, 1)
	require.Len(t, h.accounts, 1)
	require.Len(t, h.roles, 1)
	require.Len(t, h.bindings, 1)
	job, sa, role, rb := h.jobs[0], h.accounts[0], h.roles[0], h.bindings[0]
	for _, name := range []string{"Job/" + job.Name, "ServiceAccount/" + sa.Name, "Role/" + role.Name, "RoleBinding/" + rb.Name} {
		require.Equal(t, []release.HookEvent{release.HookPostUpgrade, release.HookPostRollback}, h.events[name],
			"%s runs after an upgrade or a rollback only", name)
	}
	for _, o := range []map[string]string{sa.Annotations, role.Annotations, rb.Annotations} {
		require.Less(t, o["helm.sh/hook-weight"], job.Annotations["helm.sh/hook-weight"], "the account exists before the Job")
	}
	require.Equal(t, []release.HookOutputLogPolicy{release.HookOutputOnSucceeded, release.HookOutputOnFailed}, h.logs["Job/"+job.Name],
		"helm prints what the upgrade did")

	spec := job.Spec.Template.Spec
	require.Equal(t, sa.Name, spec.ServiceAccountName)
	requireRoleOf(t, map[string]*rbacv1.Role{role.Name: role}, map[string]*rbacv1.RoleBinding{rb.Name: rb}, sa.Name, map[string][]string{
		"batch/jobs": {"get"},
		"/pods":      {"list"},
		"/pods/log":  {"get"},
	})
	require.Equal(t, []string{mover.Name}, role.Rules[0].ResourceNames, "the release's upgrade Job only")

	c := container(t, spec, "report")
	_, bins := loadReference(t)
	b := bins["causeway-upgrade"]
	require.Equal(t, []string{b.image}, c.Command)
	checkEnvKnown(t, c, b)
	e := env(c, b)
	require.Equal(t, mover.Name, e["UPGRADE_REPORT"])
	require.Equal(t, int32(0), *job.Spec.BackoffLimit)
	requireRestricted(t, c)
}

// requireRoleOf checks that the account is bound (by one RoleBinding of
// bindings) to one Role of roles that allows exactly want (by
// group/resource, sorted verbs).
func requireRoleOf(t *testing.T, roles map[string]*rbacv1.Role, bindings map[string]*rbacv1.RoleBinding, account string, want map[string][]string) {
	t.Helper()
	var role *rbacv1.Role
	for _, rb := range bindings {
		if slices.Equal(rb.Subjects, []rbacv1.Subject{{Kind: "ServiceAccount", Name: account, Namespace: namespace}}) {
			require.Nil(t, role, "one binding of %s", account)
			require.Equal(t, "Role", rb.RoleRef.Kind)
			role = roles[rb.RoleRef.Name]
			require.NotNil(t, role, "the role %s of %s", rb.RoleRef.Name, account)
		}
	}
	require.NotNil(t, role, "a role bound to %s", account)
	allowed := map[string][]string{}
	for _, r := range role.Rules {
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				allowed[g+"/"+res] = append(allowed[g+"/"+res], r.Verbs...)
			}
		}
	}
	for k := range allowed {
		slices.Sort(allowed[k])
	}
	require.Equal(t, want, allowed, "what %s may do", account)
}

// requireRestricted checks the restricted security context of a container.
func requireRestricted(t *testing.T, c corev1.Container) {
	t.Helper()
	sc := c.SecurityContext
	require.NotNil(t, sc)
	require.False(t, *sc.AllowPrivilegeEscalation)
	require.True(t, *sc.RunAsNonRoot)
	require.Equal(t, []corev1.Capability{"ALL"}, sc.Capabilities.Drop)
	require.Empty(t, sc.Capabilities.Add)
}

// twoConduits is the values of the install of two conduits (found by
// name: the list grows).
func twoConduits() struct{ values string } {
	for _, in := range installs {
		if in.name == "two conduits" {
			return struct{ values string }{in.values}
		}
	}
	panic("no install named \"two conduits\"")
}
