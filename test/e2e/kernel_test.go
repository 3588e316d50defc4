package e2e_test

import (
	"fmt"
	"slices"
	"sort"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
)

// proxyKernel is the part of the proxy namespace's kernel state the proxy
// manages: VIP rules toward its table, the table's routes, bridge ports.
type proxyKernel struct {
	// Rules are "from <prefix> lookup <table>", one entry per kernel rule
	// (duplicates show as repeated entries).
	Rules []string
	// Routes are the table's routes with their nexthops.
	Routes []string
	// Ports are the names of the bridge's ports.
	Ports []string
}

// readProxyKernel reads the proxy namespace's rules toward table, the
// table's routes and bridge0's ports.
func readProxyKernel(t *testing.T, l *labrun.Lab, table int) proxyKernel {
	t.Helper()
	h := proxyHandle(t, l)
	defer h.Close()
	var k proxyKernel
	rules, err := h.RuleList(netlink.FAMILY_ALL)
	require.NoError(t, err)
	for _, r := range rules {
		if r.Table == table && r.Src != nil {
			k.Rules = append(k.Rules, fmt.Sprintf("from %s lookup %d", r.Src, r.Table))
		}
	}
	routes, err := h.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: table}, netlink.RT_FILTER_TABLE)
	require.NoError(t, err)
	for _, r := range routes {
		var hops []string
		for _, nh := range r.MultiPath {
			hops = append(hops, nh.Gw.String())
		}
		if r.Gw != nil {
			hops = append(hops, r.Gw.String())
		}
		sort.Strings(hops)
		k.Routes = append(k.Routes, fmt.Sprintf("%v via %v", r.Dst, hops))
	}
	br, err := h.LinkByName("bridge0")
	require.NoError(t, err)
	links, err := h.LinkList()
	require.NoError(t, err)
	for _, link := range links {
		if link.Attrs().MasterIndex == br.Attrs().Index {
			k.Ports = append(k.Ports, link.Attrs().Name)
		}
	}
	sort.Strings(k.Rules)
	sort.Strings(k.Routes)
	sort.Strings(k.Ports)
	return k
}

// proxyHandle opens a netlink handle in the proxy's namespace; the caller
// closes it.
func proxyHandle(t *testing.T, l *labrun.Lab) *netlink.Handle {
	t.Helper()
	ns, err := netns.GetFromPath(l.NetNSPath("proxy"))
	require.NoError(t, err)
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns)
	require.NoError(t, err)
	return h
}

// duplicates lists the entries that occur more than once.
func duplicates(s []string) []string {
	var d []string
	for i, v := range s {
		if slices.Index(s, v) != i && !slices.Contains(d, v) {
			d = append(d, v)
		}
	}
	return d
}
