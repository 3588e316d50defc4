//go:build apiserver

package ipamd

import (
	"bytes"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ipamv1 "github.com/causeway-net/causeway/api/ipam/v1"
)

// ipam migrate copies a bbolt store into an empty Kubernetes store; a dry
// run writes nothing, a second run is refused (the target holds records),
// and a replica on the Kubernetes store then gives every child its old
// address.
func TestMigrateBoltToKubernetes(t *testing.T) {
	api := startAPI(t)
	kc := kubeconfig(t, api, api.Config.Host)

	cfg := testConfig(t)
	client, _, stop := start(t, cfg)
	held := map[string]string{}
	for i := range 5 {
		child := fmt.Sprintf("t%d", i)
		held[child] = allocateChild(t, client, child)
	}
	v6 := allocate(t, client, ipamv1.IPFamily_IPV6, "b")
	require.NoError(t, stop())

	t.Setenv("IPAM_KUBECONFIG", kc)
	run := func(args ...string) (int, string, string) {
		var out, errs bytes.Buffer
		code := Migrate(append([]string{"-datasource", cfg.Datasource, "-namespace", "default"}, args...), &out, &errs)
		return code, out.String(), errs.String()
	}
	code, out, errs := run("-dry-run")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "would copy")
	assert.Contains(t, out, "node worker: 169.255.0.0/24, 5 addresses")
	assert.Contains(t, out, "total: 2 pools, 2 conduit subnets, 2 node subnets (one IPAMBlock each), 6 addresses")
	t.Log(out)

	code, out, errs = run()
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "read back: every record at its prefix")
	code, _, errs = run()
	require.Equal(t, 1, code)
	assert.Contains(t, errs, "already holds")

	kcfg := testConfig(t)
	kcfg.Store, kcfg.Kubeconfig, kcfg.KubeNamespace = StoreKubernetes, kc, "default"
	kcfg.Identity, kcfg.LeaderLeaseDuration = "ipam-0", 3*time.Second
	kclient, kconn, kstop := start(t, kcfg)
	waitServing(t, []runningReplica{{kclient, kconn, kstop}})
	for child, addr := range held {
		assert.Equal(t, addr, allocateChild(t, kclient, child), "%s keeps its address", child)
	}
	assert.Equal(t, v6, allocate(t, kclient, ipamv1.IPFamily_IPV6, "b"))
	require.NoError(t, kstop())
}
