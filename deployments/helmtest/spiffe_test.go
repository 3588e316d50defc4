package helmtest

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// rulesOf are the caller rules (IPAM_AUTHORIZED_IDS, NSP_AUTHORIZED_IDS)
// of a rendered install.
type rulesOf struct{ ipam, nsp []string }

func authorizedRules(t *testing.T, m *manifests, bins map[string]binary) rulesOf {
	t.Helper()
	ipam := env(container(t, m.statefulSets[0].Spec.Template.Spec, "ipam"), bins["ipam"])
	nsp := env(container(t, m.deployments[0].Spec.Template.Spec, "nsp"), bins["nsp"])
	require.Equal(t, "false", ipam["IPAM_INSECURE"])
	require.Equal(t, "false", nsp["NSP_INSECURE"])
	return rulesOf{ipam: split(ipam["IPAM_AUTHORIZED_IDS"]), nsp: split(nsp["NSP_AUTHORIZED_IDS"])}
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// allowed reports whether id matches one of rules, as pkg/spiffeauthz
// reads them: spiffe://<td><path pattern>, or a path pattern in the
// server's own trust domain own; path.Match wildcards.
func allowed(rules []string, id, own string) bool {
	td, p, _ := strings.Cut(strings.TrimPrefix(id, "spiffe://"), "/")
	for _, r := range rules {
		rtd, pattern := own, r
		if strings.HasPrefix(r, "spiffe://") {
			rtd, pattern, _ = strings.Cut(strings.TrimPrefix(r, "spiffe://"), "/")
			pattern = "/" + pattern
		}
		if ok, _ := path.Match(pattern, "/"+p); ok && rtd == td {
			return true
		}
	}
	return false
}

// generatedName is a name Kubernetes could give a pod of the controller
// name: its generateName (the name and a dash; the schema's limits keep it
// under the 58 characters where Kubernetes would cut it) and five
// characters of the alphabet of its random suffixes.
func generatedName(name string) string {
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	base := name + "-"
	var b strings.Builder
	for range 5 {
		b.WriteByte(alphabet[rand.IntN(len(alphabet))])
	}
	return base + b.String()
}

// ids are the SPIFFE IDs a SPIRE would give the pods of a rendered install.
type ids struct {
	proxies   []string
	ipam, nsp string
}

// podIDs are the IDs of m's pods in the trust domain td under scheme (pod:
// NSM's ClusterSPIFFEID; serviceAccount: SPIRE's chart).
func podIDs(m *manifests, td, scheme string) ids {
	id := func(pod string, spec corev1.PodSpec) string {
		if scheme == "pod" {
			return fmt.Sprintf("spiffe://%s/ns/%s/pod/%s", td, namespace, pod)
		}
		return fmt.Sprintf("spiffe://%s/ns/%s/sa/%s", td, namespace, spec.ServiceAccountName)
	}
	var out ids
	for _, ds := range m.daemonSets {
		out.proxies = append(out.proxies, id(generatedName(ds.Name), ds.Spec.Template.Spec))
	}
	ipam := m.statefulSets[0]
	out.ipam = id(ipam.Name+"-0", ipam.Spec.Template.Spec)
	nsp := m.deployments[0]
	out.nsp = id(generatedName(generatedName(nsp.Name)), nsp.Spec.Template.Spec)
	return out
}

// TestIDSchemes: each idScheme authorizes the proxies (and, at the nsp, the
// IPAM) under its own form only; a trust domain set in the values pins the
// rules to it; the proxies of another conduit name, another trench and
// another namespace are refused.
func TestIDSchemes(t *testing.T) {
	_, bins := loadReference(t)
	const two = "conduits: [{name: lb}, {name: lb2}]\n"
	for _, tc := range []struct {
		scheme string
		serves []string
	}{
		{"pod", []string{"pod"}},
		{"serviceAccount", []string{"serviceAccount"}},
		{"any", []string{"pod", "serviceAccount"}},
	} {
		t.Run(tc.scheme, func(t *testing.T) {
			m := render(t, two+"spire: {idScheme: "+tc.scheme+"}")
			rules := authorizedRules(t, m, bins)
			for _, scheme := range []string{"pod", "serviceAccount"} {
				got := podIDs(m, "example.org", scheme)
				want := slices.Contains(tc.serves, scheme)
				for _, p := range got.proxies {
					require.Equal(t, want, allowed(rules.ipam, p, "example.org"), "%s: IPAM and proxy %s", tc.scheme, p)
					require.Equal(t, want, allowed(rules.nsp, p, "example.org"), "%s: nsp and proxy %s", tc.scheme, p)
				}
				require.Equal(t, want, allowed(rules.nsp, got.ipam, "example.org"), "%s: nsp and IPAM %s", tc.scheme, got.ipam)
			}
			outsiders := []string{
				"spiffe://example.org/ns/" + namespace + "/pod/" + generatedName("proxy-trench-a-lb3"),
				"spiffe://example.org/ns/" + namespace + "/pod/" + generatedName("proxy-trench-a-lb-x"),
				"spiffe://example.org/ns/" + namespace + "/pod/proxy-trench-a-lb",
				"spiffe://example.org/ns/other/pod/" + generatedName("proxy-trench-a-lb"),
				"spiffe://example.org/ns/other/sa/proxy-trench-a",
				"spiffe://example.org/ns/" + namespace + "/sa/proxy-trench-b",
				"spiffe://example.org/ns/" + namespace + "/sa/default",
				"spiffe://example.org/ns/" + namespace + "/pod/ipam-trench-a-0-x",
			}
			for _, id := range outsiders {
				require.False(t, allowed(rules.ipam, id, "example.org"), "IPAM refuses %s", id)
				require.False(t, allowed(rules.nsp, id, "example.org"), "nsp refuses %s", id)
			}
		})
	}
}

// TestTrustDomainPinned: spire.trustDomain writes it into every rule; a
// proxy of the same path in another trust domain is refused.
func TestTrustDomainPinned(t *testing.T) {
	_, bins := loadReference(t)
	m := render(t, "spire: {trustDomain: k8s.nsm}")
	rules := authorizedRules(t, m, bins)
	for _, r := range append(rules.ipam, rules.nsp...) {
		require.True(t, strings.HasPrefix(r, "spiffe://k8s.nsm/ns/"+namespace+"/"), r)
	}
	p := podIDs(m, "k8s.nsm", "pod").proxies[0]
	require.True(t, allowed(rules.ipam, p, "elsewhere.org"))
	require.False(t, allowed(rules.ipam, strings.Replace(p, "k8s.nsm", "elsewhere.org", 1), "elsewhere.org"))
}

// TestWorkloadAPIFromCSI: workloadAPI csi mounts the SPIFFE CSI driver's
// volume where socketDir says in every pod, and no hostPath of SPIRE's.
func TestWorkloadAPIFromCSI(t *testing.T) {
	m := render(t, "spire: {workloadAPI: csi, socketDir: /spiffe-workload-api, socket: spire-agent.sock}")
	for _, spec := range allPods(m) {
		var found bool
		for _, v := range spec.Volumes {
			if v.Name != "spire-agent-socket" {
				continue
			}
			found = true
			require.Nil(t, v.HostPath)
			require.NotNil(t, v.CSI)
			require.Equal(t, "csi.spiffe.io", v.CSI.Driver)
			require.True(t, *v.CSI.ReadOnly)
		}
		require.True(t, found, "every pod mounts the workload API")
		for _, c := range spec.Containers {
			for _, e := range c.Env {
				if e.Name == "SPIFFE_ENDPOINT_SOCKET" {
					require.Equal(t, "unix:///spiffe-workload-api/spire-agent.sock", e.Value)
				}
			}
		}
	}
}

// TestClusterSPIFFEIDs: off by default; on, one fallback ClusterSPIFFEID
// of the release's pods in the idScheme's form; refused with idScheme any.
// (The proxies' per-node one, spire.nodeIDs, is TestNodeIDsRender's.)
func TestClusterSPIFFEIDs(t *testing.T) {
	require.Empty(t, render(t, "spire: {nodeIDs: false}").clusterSPIFFEIDs)
	for scheme, tmpl := range map[string]string{
		"pod":            "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/pod/{{ .PodMeta.Name }}",
		"serviceAccount": "spiffe://{{ .TrustDomain }}/ns/{{ .PodMeta.Namespace }}/sa/{{ .PodSpec.ServiceAccountName }}",
	} {
		m := render(t, "spire: {nodeIDs: false, idScheme: "+scheme+", clusterSPIFFEIDs: {create: true, className: nsm}}")
		objs := m.clusterSPIFFEIDs
		require.Len(t, objs, 1)
		spec := objs[0]["spec"].(map[string]any)
		require.Equal(t, tmpl, spec["spiffeIDTemplate"])
		require.Equal(t, true, spec["fallback"])
		require.Equal(t, "nsm", spec["className"])
		ns := spec["namespaceSelector"].(map[string]any)["matchLabels"].(map[string]any)
		require.Equal(t, namespace, ns["kubernetes.io/metadata.name"])
		pods := spec["podSelector"].(map[string]any)["matchLabels"].(map[string]any)
		for _, obj := range podTemplates(m) {
			for k, v := range pods {
				require.Equal(t, v, obj.Labels[k], "every pod of the release is selected (%s)", k)
			}
		}
	}
	_, err := tryRender("spire: {idScheme: any, clusterSPIFFEIDs: {create: true}}")
	require.ErrorContains(t, err, "spire.idScheme to pod or serviceAccount")
}

// podTemplates are the pod templates of m's controllers.
func podTemplates(m *manifests) []corev1.PodTemplateSpec {
	var out []corev1.PodTemplateSpec
	for _, d := range m.daemonSets {
		out = append(out, d.Spec.Template)
	}
	for _, s := range m.statefulSets {
		out = append(out, s.Spec.Template)
	}
	for _, d := range m.deployments {
		out = append(out, d.Spec.Template)
	}
	return out
}

// TestWalkthroughValues: the values docs/kubernetes.md's walkthrough shows
// for SPIRE's own chart render on top of the example (the file the
// Kubernetes suite installs with) and do what the walkthrough says: the
// Workload API from the CSI driver, service-account rules only.
func TestWalkthroughValues(t *testing.T) {
	doc, err := os.ReadFile("../../docs/kubernetes.md")
	require.NoError(t, err)
	_, walk, ok := strings.Cut(string(doc), "### Installing on your own cluster")
	require.True(t, ok, "docs/kubernetes.md has the walkthrough")
	require.Contains(t, walk, "--values deployments/helm/examples/"+filepath.Base(exampleFile), "the walkthrough installs with the example file")
	_, block, ok := strings.Cut(walk, "```yaml\n")
	require.True(t, ok, "the walkthrough shows values for SPIRE's chart")
	block, _, _ = strings.Cut(block, "```")
	example, err := os.ReadFile(exampleFile)
	require.NoError(t, err)
	_, bins := loadReference(t)
	m := render(t, string(example)+block)
	for _, spec := range allPods(m) {
		for _, v := range spec.Volumes {
			if v.Name == "spire-agent-socket" {
				require.NotNil(t, v.CSI, "the walkthrough's values mount the CSI driver")
			}
		}
	}
	rules := authorizedRules(t, m, bins)
	for _, r := range append(rules.ipam, rules.nsp...) {
		require.Contains(t, r, "/sa/", "service-account rules only: %s", r)
	}
}

// TestSPIREPodLabels: every pod of the chart carries spire.podLabels (by
// default the label NSM's ClusterSPIFFEID nsm-workloads selects), and none
// when they are emptied (so that only the chart's own ClusterSPIFFEID,
// or the cluster's, selects them); the proxies carry none while they get
// per-node IDs (spire.nodeIDs, the default).
func TestSPIREPodLabels(t *testing.T) {
	m := render(t, "")
	require.NotEmpty(t, m.daemonSets)
	for _, ds := range m.daemonSets {
		require.NotContains(t, ds.Spec.Template.Labels, "spiffe.io/spiffe-id", "a proxy")
	}
	m.daemonSets = nil
	for _, tpl := range podTemplates(m) {
		require.Equal(t, "true", tpl.Labels["spiffe.io/spiffe-id"], tpl.Labels)
	}
	for _, tpl := range podTemplates(render(t, "spire: {nodeIDs: false}")) {
		require.Equal(t, "true", tpl.Labels["spiffe.io/spiffe-id"], tpl.Labels)
	}
	for _, tpl := range podTemplates(render(t, "spire: {podLabels: null}")) {
		require.NotContains(t, tpl.Labels, "spiffe.io/spiffe-id")
	}
	for _, tpl := range podTemplates(render(t, "spire: {nodeIDs: false, podLabels: {spiffe.io/spiffe-id: null, team.example/spire: causeway}}")) {
		require.NotContains(t, tpl.Labels, "spiffe.io/spiffe-id")
		require.Equal(t, "causeway", tpl.Labels["team.example/spire"])
	}
}
