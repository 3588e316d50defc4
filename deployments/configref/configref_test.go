package configref

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestCommittedReferenceIsCurrent fails when a configuration struct changed
// and the committed reference was not regenerated.
func TestCommittedReferenceIsCurrent(t *testing.T) {
	ref, err := Build()
	require.NoError(t, err)
	want, err := ref.Marshal()
	require.NoError(t, err)
	got, err := os.ReadFile(filepath.Join("..", "..", File))
	require.NoError(t, err)
	require.Equal(t, string(want), string(got), "%s is stale: run go generate ./deployments/configref", File)
}

// TestDocTablesAreCurrent fails when a configuration table of the docs
// drifts from the structs (they are generated; edit the desc tags), or when
// a binary's table is missing or given twice.
func TestDocTablesAreCurrent(t *testing.T) {
	ref, err := Build()
	require.NoError(t, err)
	var found [][]string
	for _, name := range Docs {
		got, err := os.ReadFile(filepath.Join("..", "..", name))
		require.NoError(t, err)
		want, names, err := ref.UpdateTables(got)
		require.NoError(t, err)
		require.Equal(t, string(want), string(got), "%s's configuration tables are stale: run go generate ./deployments/configref", name)
		found = append(found, names)
	}
	require.NoError(t, ref.CheckPlacement(found))
}

func TestPlacementRefusesMissingAndTwice(t *testing.T) {
	ref := Reference{Binaries: []Binary{{Name: "a"}, {Name: "b"}}}
	require.NoError(t, ref.CheckPlacement([][]string{{"a"}, {"b"}}))
	require.ErrorContains(t, ref.CheckPlacement([][]string{{"a"}, nil}), "the b table is in 0")
	require.ErrorContains(t, ref.CheckPlacement([][]string{{"a", "b"}, {"b"}}), "the b table is in 2")
}

func TestTableRendersCodeAndNew(t *testing.T) {
	b := Binary{Vars: []Var{
		{Name: "X_A", Default: "", Description: "the proxy's 'a|b' and 'c'"},
		{Name: "X_B", Default: "1s", Description: "period", New: true},
	}}
	require.Equal(t, "| variable | default | meaning |\n|---|---|---|\n"+
		"| `X_A` | `\"\"` | the proxy's `a\\|b` and `c` |\n"+
		"| `X_B` (new) | `1s` | period |\n", b.Table())
}

func TestBuildNamesVariablesAsEnvconfigDoes(t *testing.T) {
	ref, err := Build()
	require.NoError(t, err)
	vars := map[string]map[string]Var{}
	for _, b := range ref.Binaries {
		vars[b.Name] = map[string]Var{}
		for _, v := range b.Vars {
			vars[b.Name][v.Name] = v
		}
	}
	require.Equal(t, "/tmp/health.sock", vars["proxy"]["NSM_HEALTH_SOCKET"].Default)
	require.Equal(t, "ipam-service:7777", vars["proxy"]["NSM_IPAM_SERVICE"].Default)
	require.Contains(t, vars["proxy"], "NSM_NETWORK_SERVICE_NAME")
	require.Equal(t, "/run/ipam/data/registry.db", vars["ipam"]["IPAM_DATASOURCE"].Default)
	require.True(t, vars["ipam"]["IPAM_METRICS_PORT"].New)
	require.NotContains(t, vars["ipam"]["IPAM_METRICS_PORT"].Description, "new:", "the marker becomes New")
	require.Equal(t, "7778", vars["nsp"]["NSP_PORT"].Default)
	require.Contains(t, vars["nsp"], "SPIFFE_ENDPOINT_SOCKET")
}
