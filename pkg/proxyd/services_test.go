package proxyd_test

import (
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	"github.com/stretchr/testify/require"

	"github.com/causeway-net/causeway/internal/testutil"
	"github.com/causeway-net/causeway/pkg/nspd/configfile"
	"github.com/causeway-net/causeway/pkg/proxy"
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
	// With the nftables provider the target's port is in hairpin mode (a
	// target may be its own endpoint): the dataplane's State says so.
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		var targets []int
		for _, i := range st.Proxy.Interfaces {
			if i.Type == proxy.TargetConn {
				targets = append(targets, i.Index)
			}
		}
		if provider == servicelb.ProviderUserspace {
			targets = nil
		}
		var hairpin []int
		for _, p := range st.Proxy.State.Ports {
			if p.Hairpin {
				hairpin = append(hairpin, p.Index)
			}
		}
		slices.Sort(targets)
		return len(st.Proxy.Interfaces) > 0 && slices.Equal(hairpin, targets)
	}, wait, tick, "hairpin mode on the target ports with nftables only")

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

// nftDispatch4 is the IPv4 dispatch map of the nftables provider in ns:
// one element per service IP it serves.
func nftDispatch4(t *testing.T, ns *testutil.NetNS) string {
	t.Helper()
	out, err := ns.Exec("nft", "list", "map", "inet", nftlb.TableName, "dispatch4")
	require.NoError(t, err)
	return out
}

// TestDaemonServicesCollisions: a version of the file that collides with
// the proxy's state (a VIP, the bridge address, the node subnet) or has a
// default route is refused with the entry and the reason, and the last
// good services stay; a VIP that comes later onto a service IP of the
// file in force withdraws that service (logged, in -debug, out of the
// kernel) and gives it back when it goes.
func TestDaemonServicesCollisions(t *testing.T) {
	ns := testutil.NewNetNS(t, "pcol")
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	cfg.ServicesFile = filepath.Join(e.dir, "services.yaml")
	writeFile(t, cfg.ServicesFile, servicesYAML)
	e.start(t, cfg, proxyd.WithServiceNetNS(ns.Handle))
	require.Eventually(t, func() bool { return len(debugState(t, cfg.DebugSocket).Proxy.State.VIPs) == 2 }, wait, tick, "the VIPs of the NSP")
	require.Contains(t, nftDispatch4(t, ns), "10.96.0.10")

	rejected := func(edit string) string {
		writeFile(t, cfg.ServicesFile, edit)
		var st proxyd.DebugState
		require.Eventually(t, func() bool {
			st = debugState(t, cfg.DebugSocket)
			return st.Services.Rejected != nil
		}, wait, tick)
		_, ok := servicePort(st, "shop/web:http")
		require.True(t, ok, "the last good services stay")
		writeFile(t, cfg.ServicesFile, servicesYAML)
		require.Eventually(t, func() bool { return debugState(t, cfg.DebugSocket).Services.Rejected == nil }, wait, tick)
		return st.Services.Rejected.Error
	}
	msg := rejected(strings.Replace(servicesYAML, "prefixes: [", "prefixes: [0.0.0.0/0, ", 1))
	require.Contains(t, msg, "prefixes[0] (line 1): 0.0.0.0/0 is a default route")
	msg = rejected(strings.NewReplacer("10.96.0.0/24", "10.96.0.0/24, 20.0.0.0/24, 172.16.0.0/16, 'fd00::/120'",
		"ip: 10.96.0.10", "ip: 20.0.0.1", "ip: fd00:96::53", "ip: fd00::1").Replace(servicesYAML))
	require.Contains(t, msg, "4 problems")
	require.Contains(t, msg, "prefixes[2] (line 1): 172.16.0.0/16 overlaps 172.16.0.0/24, the conduit's node subnet")
	require.Contains(t, msg, "prefixes[3] (line 1): fd00::/120 overlaps fd00::/64")
	require.Contains(t, msg, `services[0] "shop/web" (line 3): ip 20.0.0.1 is in the VIP 20.0.0.1/32`)
	require.Contains(t, msg, `services[1] "shop/dns" (line 7): ip fd00::1 is the proxy's own address on the bridge`)

	// A VIP onto the service IP of shop/web: the VIP wins.
	vips := []configfile.VIP{{Name: "vip-v4", Address: "20.0.0.1/32", Trench: trench}, {Name: "vip-v6", Address: "2001:db8::1/128", Trench: trench}}
	setVIPs := func(vips []configfile.VIP) {
		e.nsp.SetConfig(&configfile.Config{Trenches: []configfile.Trench{{Name: trench}}, Conduits: []configfile.Conduit{{Name: conduit, Trench: trench}}, VIPs: vips})
	}
	setVIPs(append(slices.Clone(vips), configfile.VIP{Name: "taken", Address: "10.96.0.10/32", Trench: trench}))
	var st proxyd.DebugState
	require.Eventually(t, func() bool {
		st = debugState(t, cfg.DebugSocket)
		_, ok := servicePort(st, "shop/web:http")
		return len(st.Services.Withdrawn) == 1 && !ok
	}, wait, tick, "withdrawn")
	require.Equal(t, []string{`services[0] "shop/web": ip 10.96.0.10 is in the VIP 10.96.0.10/32: the service would take over the VIP's traffic`},
		st.Services.Withdrawn)
	_, ok := servicePort(st, "shop/dns")
	require.True(t, ok, "the other services stay")
	require.Eventually(t, func() bool { return !strings.Contains(nftDispatch4(t, ns), "10.96.0.10") }, wait, tick, "out of the kernel")
	require.Eventually(t, func() bool {
		return strings.Contains(sprint(debugState(t, cfg.DebugSocket).Proxy.State.VIPs), "10.96.0.10/32")
	}, wait, tick, "the VIP is served") // the services learn it apart from the proxy's model

	setVIPs(vips)
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		_, ok := servicePort(st, "shop/web:http")
		return ok && len(st.Services.Withdrawn) == 0
	}, wait, tick, "the VIP gone, the service is back")
	require.Eventually(t, func() bool { return strings.Contains(nftDispatch4(t, ns), "10.96.0.10") }, wait, tick)
}

// TestDaemonServicesRestartWithBrokenFile: a proxy restarted while the
// services file is broken leaves the targets the service routes they
// have (the earlier run's, the last good ones), instead of taking them
// away until their first refresh after the fix; a target new meanwhile
// gets none, and the routes of the fixed file at its next request.
func TestDaemonServicesRestartWithBrokenFile(t *testing.T) {
	ns := testutil.NewNetNS(t, "prst")
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	cfg.ServicesFile = filepath.Join(e.dir, "services.yaml")
	writeFile(t, cfg.ServicesFile, servicesYAML)
	d1, _ := e.start(t, cfg, proxyd.WithServiceNetNS(ns.Handle))
	want := []string{"10.96.0.0/24 via 172.16.0.1", "fd00:96::/112 via fd00::1"}
	routes := func(c *networkservice.Connection) []string {
		var out []string
		for _, r := range c.GetContext().GetIpContext().GetSrcRoutes() {
			out = append(out, r.GetPrefix()+" via "+r.GetNextHop())
		}
		return out
	}
	nsc := e.targetClient()
	rctx, rcancel := context.WithTimeout(e.ctx, 2*wait)
	defer rcancel()
	conn, err := nsc.Request(rctx, targetRequest("target-1", nil))
	require.NoError(t, err)
	require.Equal(t, want, routes(conn))

	require.NoError(t, d1.Stop())
	writeFile(t, cfg.ServicesFile, strings.Replace(servicesYAML, "protocol: udp", "protocol: sctp", 1))
	e.start(t, cfg, proxyd.WithServiceNetNS(ns.Handle))
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		return st.Services.Rejected != nil && st.Services.RoutesHeld
	}, wait, tick, "the broken file is refused and the routes held")
	var healed *networkservice.Connection
	require.Eventually(t, func() bool {
		ctx, cancel := context.WithTimeout(rctx, 5*time.Second)
		defer cancel()
		healed, err = nsc.Request(ctx, targetRequest("", conn))
		return err == nil
	}, wait, tick)
	require.Equal(t, want, routes(healed), "the target keeps its service routes")
	fresh, err := nsc.Request(rctx, targetRequest("target-2", nil))
	require.NoError(t, err)
	require.Empty(t, routes(fresh), "no routes to keep")

	writeFile(t, cfg.ServicesFile, servicesYAML)
	require.Eventually(t, func() bool {
		st := debugState(t, cfg.DebugSocket)
		return st.Services.Rejected == nil && !st.Services.RoutesHeld
	}, wait, tick)
	for _, c := range []*networkservice.Connection{healed, fresh} {
		c, err := nsc.Request(rctx, targetRequest("", c))
		require.NoError(t, err)
		require.Equal(t, want, routes(c))
	}
}

// A services file missing at start is one warning that says what it means
// (no services until it appears), not also the watch's generic line about
// a last good configuration that does not exist.
func TestDaemonServicesFileMissingAtStart(t *testing.T) {
	ns := testutil.NewNetNS(t, "pmis")
	e := newEnv(t)
	cfg := e.config(t, 20*time.Second)
	cfg.ServicesFile = filepath.Join(e.dir, "services.yaml")
	var log testutil.JSONLog
	sctx, cancel := context.WithTimeout(e.ctx, wait)
	defer cancel()
	d, err := proxyd.Start(sctx, cfg, slog.New(slog.NewJSONHandler(&log, nil)),
		proxyd.WithDataplane(newFakeDataplane()), proxyd.WithoutSDKLogger(), proxyd.WithServiceNetNS(ns.Handle))
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Stop() })
	const missing = "services file does not exist; no services until it appears"
	line, _ := log.Wait(wait, nil, 0, missing, "path", cfg.ServicesFile)
	require.NotNil(t, line, log.String())
	require.Equal(t, "WARN", line["level"])

	writeFile(t, cfg.ServicesFile, servicesYAML)
	require.Eventually(t, func() bool { return len(debugState(t, cfg.DebugSocket).Services.Ports) > 0 }, wait, tick,
		"the file is taken when it appears")
	require.Equal(t, 1, log.Count(missing), log.String())
	require.Zero(t, log.Count("configuration rejected; keeping the last good configuration"), log.String())
}
