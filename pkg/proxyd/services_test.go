package proxyd_test

import (
	"context"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/proxyd"
	"github.com/causeway-net/causeway/pkg/servicelb"
	"github.com/causeway-net/causeway/pkg/servicelb/nftlb"
	"github.com/causeway-net/causeway/pkg/servicelb/userspace"
)

const servicesYAML = `prefixes: [10.96.0.0/24, "fd00:96::/112"]
services:
  - name: web
    namespace: shop
    ip: 10.96.0.10
    ports: [{name: http, port: 80, protocol: TCP, targetPort: 8080}]
  - name: dns
    namespace: shop
    ip: fd00:96::53
    ports: [{port: 53, protocol: udp, endpoints: ["[fd00:5::1]:53"]}]
`

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	tmp := path + ".tmp"
	require.NoError(t, os.WriteFile(tmp, []byte(content), 0o644))
	require.NoError(t, os.Rename(tmp, path))
}

func servicePort(st proxyd.DebugState, name string) (servicelb.PortState, bool) {
	if st.Services == nil {
		return servicelb.PortState{}, false
	}
	i := slices.IndexFunc(st.Services.Ports, func(p servicelb.PortState) bool { return p.Service == name })
	if i < 0 {
		return servicelb.PortState{}, false
	}
	return st.Services.Ports[i], true
}

// TestDaemonServices runs the daemon with a services file, each provider
// programming a namespace of its own: a target gets the service
// prefixes as routes via its gateways and becomes an endpoint of the port
// that takes the connected targets; a broken edit is refused (visible in
// -debug) and the last good services stay; the target leaving removes its
// endpoint; the stop leaves no table.
func TestDaemonServices(t *testing.T) {
	for provider, table := range map[string]string{servicelb.ProviderNftables: nftlb.TableName, servicelb.ProviderUserspace: userspace.TableName} {
		t.Run(provider, func(t *testing.T) { testDaemonServices(t, provider, table) })
	}
}

func testDaemonServices(t *testing.T, provider, table string) {
	ns := testutil.NewNetNS(t, "psvc")
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	cfg.ServiceProvider = provider
	cfg.ServicesFile = filepath.Join(e.dir, "services.yaml")
	writeFile(t, cfg.ServicesFile, servicesYAML)
	d, _ := e.start(t, cfg, proxyd.WithServiceNetNS(ns.Handle))

	st := debugState(t, cfg.DebugSocket)
	require.NotNil(t, st.Services)
	require.Nil(t, st.Services.Rejected)
	require.Equal(t, "[10.96.0.0/24 fd00:96::/112]", sprint(st.Services.Prefixes))
	dns, ok := servicePort(st, "shop/dns")
	require.True(t, ok, "%+v", st.Services)
	require.Equal(t, "[[fd00:5::1]:53]", sprint(dns.Endpoints))
	web, ok := servicePort(st, "shop/web:http")
	require.True(t, ok)
	require.Empty(t, web.Endpoints, "no target yet")

	nsc := e.targetClient()
	rctx, rcancel := context.WithTimeout(e.ctx, 2*wait)
	defer rcancel()
	conn, err := nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	ipc := conn.GetContext().GetIpContext()
	var routes []string
	for _, r := range ipc.GetSrcRoutes() {
		routes = append(routes, r.GetPrefix()+" via "+r.GetNextHop())
	}
	require.Equal(t, []string{"10.96.0.0/24 via 172.16.0.1", "fd00:96::/112 via fd00::1"}, routes)
	target4 := netip.MustParsePrefix(ipc.GetSrcIpAddrs()[0]).Addr()
	want := netip.AddrPortFrom(target4, 8080)
	require.Eventually(t, func() bool {
		web, _ := servicePort(debugState(t, cfg.DebugSocket), "shop/web:http")
		return slices.Equal(web.Endpoints, []netip.AddrPort{want})
	}, wait, tick, "the connected target is the endpoint")

	// A broken edit: refused with the entry and the reason; the services stay.
	writeFile(t, cfg.ServicesFile, strings.Replace(servicesYAML, "protocol: udp", "protocol: sctp", 1))
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		return st.Services.Rejected != nil
	}, wait, tick)
	st = debugState(t, cfg.DebugSocket)
	require.Contains(t, st.Services.Rejected.Error, `services[1] "shop/dns" (line 7) ports[0]: unknown protocol "sctp"`)
	_, ok = servicePort(st, "shop/dns")
	require.True(t, ok, "the last good services stay")

	// Fixed: taken, the rejection cleared.
	writeFile(t, cfg.ServicesFile, strings.Replace(servicesYAML, "port: 53,", "port: 5353,", 1))
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		p, ok := servicePort(st, "shop/dns")
		return st.Services.Rejected == nil && ok && p.Addr.Port() == 5353
	}, wait, tick)

	// Broken again, then undone (the file as it was): nothing changes, and
	// the rejection is cleared all the same.
	fixed := strings.Replace(servicesYAML, "port: 53,", "port: 5353,", 1)
	writeFile(t, cfg.ServicesFile, strings.Replace(fixed, "protocol: udp", "protocol: sctp", 1))
	require.Eventually(t, func() bool {
		return debugState(t, cfg.DebugSocket).Services.Rejected != nil
	}, wait, tick)
	writeFile(t, cfg.ServicesFile, fixed)
	require.Eventually(t, func() bool {
		return debugState(t, cfg.DebugSocket).Services.Rejected == nil
	}, wait, tick, "an undone broken edit clears the rejection")

	// The target leaves: its endpoint goes.
	_, err = nsc.Close(rctx, conn)
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		web, _ := servicePort(debugState(t, cfg.DebugSocket), "shop/web:http")
		return len(web.Endpoints) == 0
	}, wait, tick, "the endpoint follows the target")

	exists := func() bool {
		c, err := nftlbTables(ns)
		require.NoError(t, err)
		return slices.Contains(c, table)
	}
	require.True(t, exists())
	require.NoError(t, d.Stop())
	require.False(t, exists(), "the stop removes the table")
}

// nftlbTables lists the inet tables of ns.
func nftlbTables(ns *testutil.NetNS) ([]string, error) {
	out, err := ns.Exec("nft", "list", "tables", "inet")
	if err != nil {
		return nil, err
	}
	var names []string
	for _, l := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSpace(l), "table inet "); ok {
			names = append(names, name)
		}
	}
	return names, nil
}
