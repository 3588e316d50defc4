package helmtest

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const (
	chartDir = "../helm/causeway"
	refFile  = "../config-reference.json"
	// exampleFile is the README's example values file.
	exampleFile = "../helm/examples/trench-a.yaml"
	namespace   = "causeway-test"
)

// manifests are the rendered objects of one install, decoded strictly.
type manifests struct {
	daemonSets   []*appsv1.DaemonSet
	statefulSets []*appsv1.StatefulSet
	deployments  []*appsv1.Deployment
	jobs         []*batchv1.Job
	services     map[string]*corev1.Service
	configMaps   map[string]*corev1.ConfigMap
	accounts     map[string]*corev1.ServiceAccount
	clusterRoles map[string]*rbacv1.ClusterRole
	bindings     map[string]*rbacv1.ClusterRoleBinding
	policies     map[string]*networkingv1.NetworkPolicy
	admission    []*admissionv1.ValidatingAdmissionPolicy
	admissionBnd []*admissionv1.ValidatingAdmissionPolicyBinding
	// roles and roleBindings are keyed by name, or namespace/name for
	// those the chart puts in another namespace.
	roles        map[string]*rbacv1.Role
	roleBindings map[string]*rbacv1.RoleBinding
	pdbs         map[string]*policyv1.PodDisruptionBudget
	// clusterSPIFFEIDs are spire-controller-manager's objects, not typed
	// here (its API is not a dependency of the test).
	clusterSPIFFEIDs []map[string]any
}

// render installs the chart client-side (Helm's dry run, schema included)
// with values on top of values.yaml and decodes every manifest.
func render(t *testing.T, values string) *manifests {
	t.Helper()
	m, err := tryRender(values)
	require.NoError(t, err)
	return m
}

// tryRender renders values with the SDKs of Helm 3 and Helm 4, which must
// agree: the same error or none, the same manifests.
func tryRender(values string) (*manifests, error) {
	parse := func() (map[string]any, error) {
		vals := map[string]any{}
		if err := yaml.Unmarshal([]byte(values), &vals); err != nil {
			return nil, fmt.Errorf("test values: %w", err)
		}
		return vals, nil
	}
	vals3, err := parse()
	if err != nil {
		return nil, err
	}
	vals4, _ := parse()
	out3, err3 := renderHelm3(vals3)
	out4, err4 := renderHelm4(vals4)
	if (err3 == nil) != (err4 == nil) {
		return nil, fmt.Errorf("Helm 3 and Helm 4 disagree: Helm 3: %v; Helm 4: %v", err3, err4)
	}
	if err3 != nil {
		return nil, err3
	}
	if d3, d4 := documents(out3), documents(out4); !slices.Equal(d3, d4) {
		return nil, fmt.Errorf("Helm 3 and Helm 4 render differently:\nHelm 3:\n%s\nHelm 4:\n%s", strings.Join(d3, "\n---\n"), strings.Join(d4, "\n---\n"))
	}
	return decode(out3)
}

// documents are the manifests of a release, each without the blank lines
// around it (where Helm 3 and Helm 4 differ), in a stable order.
func documents(all string) []string {
	var docs []string
	for _, doc := range releaseutil.SplitManifests(all) {
		docs = append(docs, strings.TrimSpace(doc))
	}
	slices.Sort(docs)
	return docs
}

// renderHelm3 installs the chart client-side with Helm 3's SDK (a dry run,
// schema included) and returns its manifests.
func renderHelm3(vals map[string]any) (string, error) {
	rel, err := installHelm3(vals)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// installHelm3 is Helm 3's client-side dry-run install of the chart: its
// manifests, and its hooks apart.
func installHelm3(vals map[string]any) (*release.Release, error) {
	return installHelm3As("causeway", namespace, vals)
}

// installHelm3As is installHelm3 of the release name in namespace ns.
func installHelm3As(name, ns string, vals map[string]any) (*release.Release, error) {
	chrt, err := loader.Load(chartDir)
	if err != nil {
		return nil, fmt.Errorf("load chart: %w", err)
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = name
	install.Namespace = ns
	install.KubeVersion = &chartutil.KubeVersion{Version: "v1.31.0", Major: "1", Minor: "31"}
	return install.Run(chrt, vals)
}

// nsKey is name, or namespace/name when the object names its namespace.
func nsKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// collect appends a new object to list and returns it, to decode into.
func collect[T any](list *[]*T) any {
	o := new(T)
	*list = append(*list, o)
	return o
}

// decode decodes each manifest into its Kubernetes API type; an unknown
// field or an unexpected kind is an error.
func decode(all string) (*manifests, error) {
	m := &manifests{services: map[string]*corev1.Service{}, configMaps: map[string]*corev1.ConfigMap{},
		accounts: map[string]*corev1.ServiceAccount{}, clusterRoles: map[string]*rbacv1.ClusterRole{},
		bindings: map[string]*rbacv1.ClusterRoleBinding{}, roles: map[string]*rbacv1.Role{},
		roleBindings: map[string]*rbacv1.RoleBinding{}, pdbs: map[string]*policyv1.PodDisruptionBudget{},
		policies: map[string]*networkingv1.NetworkPolicy{}}
	for name, doc := range releaseutil.SplitManifests(all) {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		var obj any
		switch head.APIVersion + "/" + head.Kind {
		case "apps/v1/DaemonSet":
			obj = collect(&m.daemonSets)
		case "apps/v1/StatefulSet":
			obj = collect(&m.statefulSets)
		case "apps/v1/Deployment":
			obj = collect(&m.deployments)
		case "batch/v1/Job":
			obj = collect(&m.jobs)
		case "v1/Service":
			obj = &corev1.Service{}
		case "v1/ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1/ServiceAccount":
			obj = &corev1.ServiceAccount{}
		case "rbac.authorization.k8s.io/v1/ClusterRole":
			obj = &rbacv1.ClusterRole{}
		case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
			obj = &rbacv1.ClusterRoleBinding{}
		case "networking.k8s.io/v1/NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy":
			obj = collect(&m.admission)
		case "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding":
			obj = collect(&m.admissionBnd)
		case "rbac.authorization.k8s.io/v1/Role":
			obj = &rbacv1.Role{}
		case "rbac.authorization.k8s.io/v1/RoleBinding":
			obj = &rbacv1.RoleBinding{}
		case "policy/v1/PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "spire.spiffe.io/v1alpha1/ClusterSPIFFEID":
			o := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			m.clusterSPIFFEIDs = append(m.clusterSPIFFEIDs, o)
			continue
		default:
			return nil, fmt.Errorf("%s: unexpected %s %s", name, head.APIVersion, head.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("%s (%s): %w\n%s", name, head.Kind, err, doc)
		}
		switch o := obj.(type) {
		case *corev1.Service:
			m.services[o.Name] = o
		case *corev1.ConfigMap:
			m.configMaps[o.Name] = o
		case *corev1.ServiceAccount:
			m.accounts[o.Name] = o
		case *rbacv1.ClusterRole:
			m.clusterRoles[o.Name] = o
		case *rbacv1.ClusterRoleBinding:
			m.bindings[o.Name] = o
		case *networkingv1.NetworkPolicy:
			m.policies[o.Name] = o
		case *rbacv1.Role:
			m.roles[nsKey(o.Namespace, o.Name)] = o
		case *rbacv1.RoleBinding:
			m.roleBindings[nsKey(o.Namespace, o.Name)] = o
		case *policyv1.PodDisruptionBudget:
			m.pdbs[o.Name] = o
		}
	}
	slices.SortFunc(m.daemonSets, func(a, b *appsv1.DaemonSet) int { return strings.Compare(a.Name, b.Name) })
	return m, nil
}

// reference is deployments/config-reference.json, written by the main
// module from the binaries' configuration structs.
type reference struct {
	ImageUser int `json:"imageUser"`
	Binaries  []struct {
		Name  string `json:"name"`
		Image string `json:"image"`
		Vars  []struct {
			Name    string `json:"name"`
			Default string `json:"default"`
		} `json:"vars"`
	} `json:"binaries"`
	ProxySysctls map[string][]string `json:"proxySysctls"`
}

// binary is what the chart's test knows of one binary.
type binary struct {
	image    string
	defaults map[string]string // every variable it reads → its default
}

func loadReference(t *testing.T) (reference, map[string]binary) {
	t.Helper()
	data, err := os.ReadFile(refFile)
	require.NoError(t, err)
	var ref reference
	require.NoError(t, json.Unmarshal(data, &ref), "%s", refFile)
	bins := map[string]binary{}
	for _, b := range ref.Binaries {
		d := map[string]string{}
		for _, v := range b.Vars {
			d[v.Name] = v.Default
		}
		bins[b.Name] = binary{image: b.Image, defaults: d}
	}
	require.Contains(t, bins, "proxy")
	return ref, bins
}

// env is the effective environment of a container for a binary: the
// binary's defaults overridden by the container's values. A variable set
// from a field reference is "<fieldPath>".
func env(c corev1.Container, b binary) map[string]string {
	out := map[string]string{}
	for k, v := range b.defaults {
		out[k] = v
	}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil {
			out[e.Name] = "<" + e.ValueFrom.FieldRef.FieldPath + ">"
			continue
		}
		out[e.Name] = e.Value
	}
	return out
}

func absChart(t *testing.T) string {
	t.Helper()
	p, err := filepath.Abs(chartDir)
	require.NoError(t, err)
	return p
}

// otherRoles are the Roles and RoleBindings of m but the upgrade Job's,
// which every release with the upgrade has (TestUpgradeJob checks them).
func otherRoles(m *manifests) (map[string]*rbacv1.Role, map[string]*rbacv1.RoleBinding) {
	roles, bindings := map[string]*rbacv1.Role{}, map[string]*rbacv1.RoleBinding{}
	for k, r := range m.roles {
		if r.Labels["app.kubernetes.io/component"] != "upgrade" {
			roles[k] = r
		}
	}
	for k, b := range m.roleBindings {
		if b.Labels["app.kubernetes.io/component"] != "upgrade" {
			bindings[k] = b
		}
	}
	return roles, bindings
}
