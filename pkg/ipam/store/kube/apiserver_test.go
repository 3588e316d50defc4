//go:build apiserver

package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/causeway-net/causeway/internal/apiservertest"
	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/ipam/store"
	"github.com/causeway-net/causeway/pkg/ipam/store/memory"
)

// realAPI starts an API server with the chart's CRDs and returns a client.
func realAPI(t testing.TB) (*apiservertest.Server, dynamic.Interface) {
	t.Helper()
	root, err := testutil.ModuleRoot()
	require.NoError(t, err)
	bin, etcd := apiservertest.Require(t, root)
	s := apiservertest.Start(t, bin, etcd)
	s.InstallCRDs(filepath.Join(root, "deployments/helm/causeway/crds/ipam.causeway.net.yaml"))
	client, err := dynamic.NewForConfig(s.Config)
	require.NoError(t, err)
	return s, client
}

func openReal(t testing.TB, client dynamic.Interface, id string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Options{Client: client, Namespace: "default", Trench: "blue", Identity: id, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	return s
}

// Against a real API server: the CRDs accept every record, a reopened
// store loads what the reference store keeps, a stale writer gets a
// Conflict and is fenced, and kubectl's columns show the records.
func TestAPIServerStore(t *testing.T) {
	api, client := realAPI(t)
	s := openReal(t, client, "r1")
	ref := memory.New()
	for _, b := range randomOps(rand.New(rand.NewPCG(1, 7)), 40) {
		require.NoError(t, ref.Apply(context.Background(), b))
		require.NoError(t, s.Apply(context.Background(), b))
	}
	want, err := ref.Load(context.Background())
	require.NoError(t, err)
	got, err := openReal(t, client, "r2").Load(context.Background())
	require.NoError(t, err)
	assertSame(t, want, got)

	// s is deposed (r2 claimed the pools): its pool writes conflict.
	err = s.Apply(context.Background(), []store.Op{put(store.LevelConduit, 4, "new", "", "", "172.16.240.0/20", t0)})
	require.ErrorIs(t, err, ErrFenced)

	cols, rows := table(t, api, "ipampools")
	assert.Equal(t, []string{"Name", "Trench", "Family", "Prefix", "Conduits", "Nodes", "Served-By", "Heartbeat"}, cols)
	require.Len(t, rows, 2)
	assert.Equal(t, []any{"blue-ipv4", "blue", "ipv4", "172.16.0.0/16"}, rows[0][:4])
	assert.Equal(t, "r2", rows[0][6])
	cols, rows = table(t, api, "ipamblocks")
	assert.Equal(t, []string{"Name", "Trench", "Conduit", "Node", "Prefix", "Addresses", "Renewed"}, cols)
	assert.NotEmpty(t, rows)
}

// table reads a resource as kubectl get does (the server's table).
func table(t *testing.T, api *apiservertest.Server, resource string) ([]string, [][]any) {
	t.Helper()
	hc, err := rest.HTTPClientFor(api.Config)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/apis/%s/%s/namespaces/default/%s", api.Config.Host, Group, Version, resource), nil)
	require.NoError(t, err)
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	var tb struct {
		ColumnDefinitions []struct{ Name string } `json:"columnDefinitions"`
		Rows              []struct{ Cells []any } `json:"rows"`
	}
	require.NoError(t, json.Unmarshal(body, &tb), "%s", body)
	var cols []string
	for _, c := range tb.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	var rows [][]any
	for _, r := range tb.Rows {
		rows = append(rows, r.Cells)
	}
	t.Logf("kubectl get %s:\n%v\n%v", resource, cols, rows)
	return cols, rows
}

// TestDrainedConduitRecordsGo against a real API server: the objects of a
// conduit that left the configuration are deleted once its leases end,
// not before.
func TestAPIServerDrainedConduitRecordsGo(t *testing.T) {
	_, client := realAPI(t)
	drainedConduitRecordsGo(t, client, "default")
}
