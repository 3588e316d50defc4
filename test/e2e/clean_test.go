package e2e_test

import (
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/pkg/lab/labrun"
	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// hostState is what the lab could leave behind in the host's own namespace.
type hostState struct {
	veths, rules, routes []string
}

func snapshotHost(t *testing.T) hostState {
	t.Helper()
	var s hostState
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatalf("host links: %v", err)
	}
	// Bridges of the host and their ports are someone else's (a container
	// runtime's CNI bridge and its pods' veths, e.g. a test cluster on the
	// same machine): the lab makes none in the host's namespace.
	foreign := map[int]bool{}
	for _, l := range links {
		if l.Type() == "bridge" || l.Attrs().MasterIndex != 0 {
			foreign[l.Attrs().Index] = true
			continue
		}
		if l.Type() == "veth" {
			s.veths = append(s.veths, l.Attrs().Name)
		}
	}
	rules, err := netlink.RuleList(netlink.FAMILY_ALL)
	if err != nil {
		t.Fatalf("host rules: %v", err)
	}
	for _, r := range rules {
		s.rules = append(s.rules, r.String())
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{Table: syscall.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		t.Fatalf("host routes: %v", err)
	}
	for _, r := range routes {
		if !foreign[r.LinkIndex] {
			s.routes = append(s.routes, r.String())
		}
	}
	return s
}

// added is what after has and before has not.
func added(before, after []string) []string {
	var out []string
	for _, a := range after {
		if !slices.Contains(before, a) {
			out = append(out, a)
		}
	}
	return out
}

// labRecord is what a lab made, read while it is up.
type labRecord struct {
	id, runDir, nsPrefix string
	// namespaces are the names of the lab's namespaces.
	namespaces []string
}

func recordLab(t *testing.T, l *labrun.Lab) labRecord {
	t.Helper()
	r := labRecord{id: l.ID(), runDir: l.RunDir()}
	r.nsPrefix = strings.TrimSuffix(l.NetNS("proxy"), "proxy")
	if r.nsPrefix == "" || r.nsPrefix == l.NetNS("proxy") {
		t.Fatalf("cannot tell the lab's namespace prefix from %q", l.NetNS("proxy"))
	}
	entries, err := os.ReadDir(topo.NetNSDir)
	if err != nil {
		t.Fatalf("list namespaces: %v", err)
	}
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), r.nsPrefix) {
			continue
		}
		r.namespaces = append(r.namespaces, e.Name())
	}
	if len(r.namespaces) < 4 {
		t.Fatalf("expected the lab's namespaces (proxy, ext, LBs, targets) with prefix %q, found %v", r.nsPrefix, r.namespaces)
	}
	return r
}

// assertClean is scenario 9: after Down no namespace, process, run
// directory, veth, rule or route of the lab remains.
func assertClean(t *testing.T, r labRecord, before hostState) {
	t.Helper()
	entries, err := os.ReadDir(topo.NetNSDir)
	if err == nil {
		for _, e := range entries {
			assert.False(t, strings.HasPrefix(e.Name(), r.nsPrefix), "namespace %s of lab %s remains", e.Name(), r.id)
		}
	}
	_, err = os.Stat(r.runDir)
	assert.True(t, os.IsNotExist(err), "run directory %s remains (stat: %v)", r.runDir, err)

	// A process of the lab runs one of the suite's binaries, or names the
	// run directory or a namespace of the run in its command line or
	// environment. (Namespace inodes are no proof: the kernel reuses them for
	// the namespaces of other tests.)
	self := "/proc/" + strconv.Itoa(os.Getpid())
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		if p == self {
			continue
		}
		exe, _ := os.Readlink(p + "/exe")
		env, _ := os.ReadFile(p + "/environ")
		args := cmdline(p)
		switch {
		case binDir != "" && strings.HasPrefix(exe, binDir+"/"):
			assert.Failf(t, "process remains", "%s (%s) still runs a lab binary", p, args)
		case strings.Contains(args, r.runDir) || strings.Contains(string(env), r.runDir):
			assert.Failf(t, "process remains", "%s (%s) still refers to the run directory %s", p, args, r.runDir)
		case strings.Contains(args, r.nsPrefix):
			assert.Failf(t, "process remains", "%s (%s) still refers to the run's namespaces", p, args)
		}
	}

	after := snapshotHost(t)
	assert.Empty(t, added(before.veths, after.veths), "veths left in the host namespace")
	assert.Empty(t, added(before.rules, after.rules), "rules left in the host namespace")
	assert.Empty(t, added(before.routes, after.routes), "routes left in the host namespace")
}

func cmdline(proc string) string {
	b, _ := os.ReadFile(proc + "/cmdline")
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}
