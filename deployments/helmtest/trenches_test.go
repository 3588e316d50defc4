package helmtest

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	"helm.sh/helm/v3/pkg/releaseutil"
	"sigs.k8s.io/yaml"
)

// everyObject are values under which the chart makes every kind of object
// it can: the IPAM's replicas on the Kubernetes store with its uninstall
// hook, the Kubernetes services source with Roles in another namespace and
// its admission policy, the proxies' upgrade hook, ClusterSPIFFEIDs and
// per-node IDs, two conduits.
const everyObject = `
conduits: [{name: load-balancer}, {name: lb-b}]
ipam: {replicas: 3, deleteOnUninstall: true}
services: {enabled: true, source: kubernetes, namespaces: [shop]}
proxy: {updateStrategy: OnDelete}
spire: {idScheme: pod, nodeIDs: true, clusterSPIFFEIDs: {create: true}}
`

// clusterScoped are the kinds the chart makes that have no namespace.
var clusterScoped = map[string]bool{
	"ClusterRole": true, "ClusterRoleBinding": true, "ClusterSPIFFEID": true,
	"ValidatingAdmissionPolicy": true, "ValidatingAdmissionPolicyBinding": true,
}

// TestTwoTrenchesShareACluster: two releases of the chart, each making
// every kind of object it can (everyObject), hooks included, never make
// one object twice (the same kind, namespace and name; cluster-wide
// objects by kind and name): two trenches in one namespace, two in two
// namespaces, one trench's name in two namespaces. The Kubernetes suite
// runs two trenches beside its own (TestTrench/TwoTrenches).
func TestTwoTrenchesShareACluster(t *testing.T) {
	type install struct{ release, namespace string }
	for _, pair := range [][2]install{
		{{"trench-a", "red"}, {"trench-b", "red"}},
		{{"trench-a", "red"}, {"trench-b", "blue"}},
		{{"trench-a", "red"}, {"trench-a", "blue"}},
	} {
		var objects [2]map[string]bool
		for i, in := range pair {
			objects[i] = releaseObjects(t, in.release, in.namespace, everyObject+"trench: {name: "+in.release+"}\n")
		}
		for key := range objects[0] {
			require.False(t, objects[1][key], "%v and %v both make %s", pair[0], pair[1], key)
		}
	}
}

// releaseObjects renders the chart as the release name in namespace ns
// and returns its objects (hooks included) as "kind namespace/name", the
// namespace empty for cluster-wide kinds.
func releaseObjects(t *testing.T, name, ns, values string) map[string]bool {
	t.Helper()
	vals := map[string]any{}
	require.NoError(t, yaml.Unmarshal([]byte(values), &vals))
	rel, err := installHelm3As(name, ns, vals)
	require.NoError(t, err)
	var docs []string
	for _, doc := range releaseutil.SplitManifests(rel.Manifest) {
		docs = append(docs, doc)
	}
	for _, h := range rel.Hooks {
		docs = append(docs, h.Manifest)
	}
	out := map[string]bool{}
	for _, doc := range docs {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
			} `json:"metadata"`
		}
		require.NoError(t, yaml.Unmarshal([]byte(doc), &head))
		where := head.Metadata.Namespace
		switch {
		case clusterScoped[head.Kind]:
			require.Empty(t, where, "%s %s is cluster-wide", head.Kind, head.Metadata.Name)
		case where == "":
			where = ns
		}
		key := fmt.Sprintf("%s %s/%s", head.Kind, where, head.Metadata.Name)
		require.False(t, out[key], "%s/%s makes %s twice", ns, name, key)
		out[key] = true
	}
	require.NotEmpty(t, out)
	return out
}
