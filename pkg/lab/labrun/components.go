package labrun

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/internal/netnsdo"
	"github.com/causeway-net/causeway/pkg/lab/lbstub"
	"github.com/causeway-net/causeway/pkg/lab/targetaddrs"
	"github.com/causeway-net/causeway/pkg/lab/topo"
	"github.com/causeway-net/causeway/pkg/nsm/controlplane"
)

// How long a component may take to announce it is serving.
const startTimeout = 90 * time.Second

func (l *Lab) bin(name string) string { return filepath.Join(l.state().BinDir, name) }

// podEnv is what Kubernetes' downward API gives a pod and NSM reads: the
// node (every component of the lab runs on NodeName), the pod's name and
// the cluster's (the run). A target names its own pod with them on its
// connection (lab target: targetstub.Config.PodLabels); the NSMgr's
// clientinfo puts its own on every label a client left unset (nodeName is
// what the proxy's service matches a target on) and warns when they are
// not set.
func (l *Lab) podEnv(component string) []string {
	return []string{"NODE_NAME=" + NodeName, "POD_NAME=" + l.podName(component), "CLUSTER_NAME=lab-" + l.ID()}
}

// podName is the name of the component's pod: the component's, and for
// the proxy its NSM_NAME (with the count of its pod's replacements, once
// replaced).
func (l *Lab) podName(component string) string {
	if component == "proxy" {
		if n := l.state().ProxyPod; n > 0 {
			return fmt.Sprintf("proxy-%s-%d", l.ID(), n)
		}
		return "proxy-" + l.ID()
	}
	return component
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

// addLBNetNS creates the namespace of the LB of index i and its link to the
// external host.
func (l *Lab) addLBNetNS(i int, name string) error {
	path, err := l.run.AddNetNS(name)
	if err != nil {
		return err
	}
	k := linkOf(i)
	return topo.AddVeth(
		topo.VethEnd{NetNSPath: path, Name: lbExtIf, Addrs: []netip.Prefix{k.LB4, k.LB6}},
		topo.VethEnd{NetNSPath: l.NetNSPath("ext"), Name: k.ExtIf, Addrs: []netip.Prefix{k.Ext4, k.Ext6}})
}

// addTargetNetNS creates the namespace of a target.
func (l *Lab) addTargetNetNS(name string) error {
	path, err := l.run.AddNetNS(name)
	if err != nil {
		return err
	}
	return topo.ApplySysctls(path, topo.RouterSysctls)
}

// ---- NSM control plane ----

// nsmgrURL is where the NSMgr of the run serves (NSM_CONNECT_TO).
func (l *Lab) nsmgrURL() *url.URL {
	return &url.URL{Scheme: "unix", Path: l.run.Path(controlplane.NSMgrSocket)}
}

// startNSM runs the NSM control plane (NSMgr with its registry and the veth
// forwarder, see pkg/nsm/controlplane) as `lab nsm` in the host namespace, serving on unix
// sockets in the run directory.
func (l *Lab) startNSM() error {
	st := l.state()
	// The NSMgr makes this directory on the host if it is missing; it goes
	// with the run when it is still empty.
	if err := l.run.RecordMissingDirs(controlplane.SDKConfigDir); err != nil {
		return err
	}
	err := l.startComponent("nsm", "", append([]string{l.bin("lab"), "nsm",
		"-dir", l.run.Dir,
		"-name", "lab-" + st.ID,
		"-nse-expiration", st.NSEExpiration,
	}, st.tokenLifetimeArgs()...), nil)
	if err != nil {
		return err
	}
	return l.waitLog("nsm", "nsm control plane up", startTimeout)
}

// ---- nsp ----

func (l *Lab) nspConfigPath() string { return l.run.Path("nsp.yaml") }

func (l *Lab) nspYAML(vips []string) string { return l.nspYAMLWith(l.state().Conduit, vips) }

func (l *Lab) nspYAMLWith(conduit string, vips []string) string {
	st := l.state()
	y := fmt.Sprintf("trenches: [{name: %s}]\nconduits:\n  - {name: %s, trench: %s}\nvips:\n", st.Trench, conduit, st.Trench)
	for i, v := range vips {
		y += fmt.Sprintf("  - {name: vip-%d, address: %s, trench: %s}\n", i+1, v, st.Trench)
	}
	return y
}

func (l *Lab) writeNSPConfig(vips []string) error { return l.WriteRawNSPConfig(l.nspYAML(vips)) }

// WriteRawNSPConfig replaces the nsp's configuration file with yaml (the
// nsp process follows the file; a broken file is logged and ignored by it).
func (l *Lab) WriteRawNSPConfig(yaml string) error {
	return replaceFile(l.nspConfigPath(), yaml, "nsp config")
}

// replaceFile writes content to path through a rename, so that a process
// that follows the file reads either version whole.
func replaceFile(path, content, what string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}

// ListConduit writes the nsp file with the lab's conduit (listed) or with
// that conduit renamed (not listed: an operator's edit that drops it), the
// VIPs unchanged.
func (l *Lab) ListConduit(listed bool) error {
	st := l.state()
	name := st.Conduit
	if !listed {
		name += "-renamed"
	}
	return l.WriteRawNSPConfig(l.nspYAMLWith(name, st.VIPs))
}

// SetVIPs makes vips the trench's VIPs: it rewrites the nsp file (the proxy
// follows through the NSP) and the external host's routes. Running targets
// keep serving the VIPs they started with; targets started later get the new
// ones.
func (l *Lab) SetVIPs(vips []string) error {
	if _, err := parseVIPs(vips); err != nil {
		return err
	}
	old := l.VIPs()
	l.mu.Lock()
	l.st.VIPs = append([]string(nil), vips...)
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return err
	}
	if err := l.writeNSPConfig(vips); err != nil {
		return err
	}
	if err := l.syncExtRoutes(); err != nil {
		return err
	}
	var errs []error
	for _, v := range old {
		if !slices.Contains(l.VIPs(), v) {
			errs = append(errs, l.delExtRoutes(v))
		}
	}
	return errors.Join(errs...)
}

func (l *Lab) startNSP(ctx context.Context) error {
	st := l.state()
	err := l.startComponent("nsp", "ctl", []string{l.bin("nsp")}, []string{
		"NSP_PORT=" + strconv.Itoa(nspPort),
		"NSP_CONFIG_FILE=" + l.nspConfigPath(),
		"NSP_CONFIG_POLL_INTERVAL=2s",
		"NSP_LOG_LEVEL=" + st.LogLevel,
		"NSP_METRICS_PORT=" + strconv.Itoa(nspMetricsPort),
		"NSP_INSECURE=true", // the lab has no SPIRE
	})
	if err != nil {
		return err
	}
	return l.waitLog("nsp", "serving", startTimeout)
}

// ---- ipam ----

// StartIPAM starts the IPAM in the ctl namespace on the run's database file
// and waits until it serves.
func (l *Lab) StartIPAM() error {
	st := l.state()
	err := l.startComponent("ipam", "ctl", []string{l.bin("ipam")}, append([]string{
		"IPAM_PORT=" + strconv.Itoa(ipamPort),
		"IPAM_DATASOURCE=" + l.IPAMStore(),
		"IPAM_TRENCH_NAME=" + st.Trench,
		"IPAM_NSP_SERVICE=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(nspPort)),
		"IPAM_PREFIX_IPV4=" + st.IPAMPrefixIPv4,
		"IPAM_PREFIX_IPV6=" + st.IPAMPrefixIPv6,
		"IPAM_METRICS_PORT=" + strconv.Itoa(ipamMetricsPort),
		"IPAM_LOG_LEVEL=" + st.LogLevel,
		"IPAM_INSECURE=true", // the lab has no SPIRE
	}, st.IPAMEnv...))
	if err != nil {
		return err
	}
	return l.waitLog("ipam", "serving", startTimeout)
}

// IPAMStore is the IPAM's store file (IPAM_DATASOURCE); its snapshots are
// in snapshots/ beside it.
func (l *Lab) IPAMStore() string { return l.run.Path("ipam", "registry.db") }

// ExitStatus is the exit status of the component's last process, or -1
// while it runs or if it never ran.
func (l *Lab) ExitStatus(component string) int {
	p := l.proc(component)
	if p == nil {
		return -1
	}
	e, ended := p.exited()
	if !ended {
		return -1
	}
	return e.Code
}

// RestoreIPAM runs `ipam restore` on the lab's store (the IPAM must be
// stopped) and returns what it printed.
func (l *Lab) RestoreIPAM() (string, error) {
	return runCmd(l.bin("ipam"), "restore", "-datasource", l.IPAMStore())
}

// KillIPAM kills the IPAM with SIGKILL.
func (l *Lab) KillIPAM() error { return l.kill("ipam") }

// ---- proxy ----

// StartProxy starts the proxy in its namespace and waits until its endpoint
// is registered.
func (l *Lab) StartProxy() error { return l.startProxy("endpoint serving and registered") }

// StartProxyUnregistered starts the proxy and waits only until its
// endpoint serves: with NSM away it cannot register, and keeps trying.
func (l *Lab) StartProxyUnregistered() error {
	return l.startProxy("endpoint serving, registering in the background")
}

// startProxy starts the proxy and waits until it logs the message msg.
func (l *Lab) startProxy(msg string) error {
	st := l.state()
	listen := l.run.Path("proxy.sock")
	// A killed proxy leaves its socket file behind.
	if err := os.Remove(listen); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale proxy socket: %w", err)
	}
	err := l.startComponent("proxy", "proxy", []string{l.bin("proxy")}, append([]string{
		"NSM_INSECURE=true",
		"NSM_CONNECT_TO=" + l.nsmgrURL().String(),
		"NSM_IPAM_SERVICE=" + l.ipamAddr(),
		"NSM_NSP_SERVICE=" + l.nspAddr(),
		"NSM_NAME=" + l.podName("proxy"),
		"NSM_HOST=" + NodeName,
		"NSM_SERVICE_NAME=" + l.proxyService(),
		"NSM_NETWORK_SERVICE_NAME=" + l.lbService(),
		"NSM_TRENCH=" + st.Trench,
		"NSM_CONDUIT=" + st.Conduit,
		"NSM_NAMESPACE=" + st.Namespace,
		"NSM_IP_FAMILY=dualstack",
		"NSM_HEALTH_SOCKET=" + l.ProxyHealthSocket(),
		"NSM_DEBUG_SOCKET=" + l.ProxyDebugSocket(),
		"NSM_LISTEN_ON=" + listen,
		"NSM_BRIDGE_MAC_FILE=" + l.run.Path("bridge.mac"),
		"NSM_METRICS_ADDRESS=" + net.JoinHostPort("", strconv.Itoa(proxyMetricsPort)),
		"NSM_LOG_LEVEL=" + st.LogLevel,
		"NSM_IP_RELEASE_DELAY=" + st.ReleaseDelay,
		"NSM_GRPC_MAX_BACKOFF=1s",
		"NSM_MAX_TOKEN_LIFETIME=" + st.tokenLifetime(),
	}, append(l.serviceEnv(), st.ProxyEnv...)...))
	if err != nil {
		return err
	}
	return l.waitLog("proxy", msg, startTimeout)
}

// KillProxy kills the proxy with SIGKILL (its namespace and kernel state
// stay, as after a container crash).
func (l *Lab) KillProxy() error { return l.kill("proxy") }

// ---- load balancers ----

func (l *Lab) startLBProcess(name string) error {
	st := l.state()
	i := slices.Index(st.LBs, name)
	if i < 0 {
		return fmt.Errorf("unknown LB %q", name)
	}
	k := linkOf(i)
	argv := []string{l.bin("lab"), "lb",
		"-name", name,
		"-nsmgr", l.nsmgrURL().String(),
		"-service", l.lbService(),
		"-socket", l.run.Path(name + ".sock"),
		"-targets-dir", l.TargetsDir(),
		"-route", netip.PrefixFrom(extV4, 32).String() + "=" + k.Ext4.Addr().String(),
		"-route", netip.PrefixFrom(extV6, 128).String() + "=" + k.Ext6.Addr().String(),
	}
	for _, v := range st.VIPs {
		argv = append(argv, "-vip", netip.MustParsePrefix(v).Addr().String())
	}
	if err := l.startComponent(name, name, argv, nil); err != nil {
		return err
	}
	return l.waitLog(name, "lb stub up", startTimeout)
}

// KillLB kills the LB's process with SIGKILL and, with deleteNS, deletes
// its namespace too (as a pod that goes away); the external host stops
// routing the VIPs through it at once (as its BGP session would drop).
func (l *Lab) KillLB(name string, deleteNS bool) error {
	if err := l.kill(name); err != nil {
		return err
	}
	if deleteNS {
		if _, err := runCmd("ip", "netns", "del", l.NetNS(name)); err != nil {
			return err
		}
		// The kernel destroys a deleted namespace's links asynchronously;
		// wait for the external host's end of the LB's veth to go, so that
		// a StartLB right after does not find it in its way.
		if i := slices.Index(l.state().LBs, name); i >= 0 {
			if err := l.waitLinkGone(l.NetNSPath("ext"), linkOf(i).ExtIf, startTimeout); err != nil {
				return err
			}
		}
	}
	return l.syncExtRoutes()
}

// waitLinkGone polls until the link name no longer exists in the namespace.
func (l *Lab) waitLinkGone(nsPath, name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		gone := false
		err := netnsdo.WithNetlink(nsPath, func(h *netlink.Handle) error {
			_, err := h.LinkByName(name)
			var notFound netlink.LinkNotFoundError
			gone = errors.As(err, &notFound)
			return nil
		})
		if err != nil {
			return err
		}
		if gone {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("link %s still in %s after %s", name, nsPath, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StartLB (re)starts the LB name: it creates its namespace and link to the
// external host if they are missing (a new name is added to the lab), starts
// its process and routes the VIPs through it again.
func (l *Lab) StartLB(name string) error {
	if !l.owner {
		return errNotOwner
	}
	if err := checkName(name); err != nil {
		return err
	}
	l.mu.Lock()
	i := slices.Index(l.st.LBs, name)
	if i < 0 {
		if slices.Contains(l.st.Targets, name) {
			l.mu.Unlock()
			return fmt.Errorf("%s is a target", name)
		}
		l.st.LBs = append(l.st.LBs, name)
		i = len(l.st.LBs) - 1
	}
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return err
	}
	if !exists(l.NetNSPath(name)) {
		if err := l.addLBNetNS(i, name); err != nil {
			return err
		}
	}
	if err := l.startLBProcess(name); err != nil {
		return err
	}
	// Route through the LB only once it reaches targets (as its BGP
	// announcement would come), so that new flows are not black-holed
	// while the proxy connects to it.
	if pubs, err := targetaddrs.Read(l.TargetsDir()); err == nil && len(pubs) > 0 {
		if err := l.waitLog(name, lbstub.ReadyMessage, startTimeout); err != nil {
			return err
		}
	}
	return l.syncExtRoutes()
}

// syncExtRoutes routes every VIP of the external host over the LBs whose
// process runs, with explicit devices. IPv4 routes are replaced; IPv6 ones
// are deleted and added again (IPv6 multipath replaces are not reliable
// across kernels).
func (l *Lab) syncExtRoutes() error {
	st := l.state()
	type gw struct {
		addr netip.Addr
		dev  string
	}
	var gw4, gw6 []gw
	for i, name := range st.LBs {
		if l.Running(name) {
			k := linkOf(i)
			gw4 = append(gw4, gw{k.LB4.Addr(), k.ExtIf})
			gw6 = append(gw6, gw{k.LB6.Addr(), k.ExtIf})
		}
	}
	return netnsdo.WithNetlink(l.NetNSPath("ext"), func(h *netlink.Handle) error {
		for _, vip := range l.VIPs() {
			gws := gw4
			if vip.Addr().Is6() {
				gws = gw6
			}
			dst := &net.IPNet{IP: vip.Addr().AsSlice(), Mask: net.CIDRMask(vip.Bits(), vip.Addr().BitLen())}
			if len(gws) == 0 || vip.Addr().Is6() {
				// Every route to dst goes (IPv6: one per nexthop on some kernels).
				for h.RouteDel(&netlink.Route{Dst: dst}) == nil {
				}
			}
			if len(gws) == 0 {
				continue
			}
			// The client addresses on lo are the source of the external
			// host's own connections: each LB routes them back, while
			// the address of the link a flow happens to leave by is
			// known to that LB only (a plain `curl` from ext would fail
			// whenever the reply came back through the other LB).
			src := extV4
			if vip.Addr().Is6() {
				src = extV6
			}
			r := &netlink.Route{Dst: dst, Src: src.AsSlice()}
			for _, g := range gws {
				link, err := h.LinkByName(g.dev)
				if err != nil {
					return fmt.Errorf("external host: link %s: %w", g.dev, err)
				}
				if len(gws) == 1 {
					r.Gw, r.LinkIndex = g.addr.AsSlice(), link.Attrs().Index
				} else {
					r.MultiPath = append(r.MultiPath, &netlink.NexthopInfo{Gw: g.addr.AsSlice(), LinkIndex: link.Attrs().Index})
				}
			}
			add := h.RouteAdd
			if vip.Addr().Is4() {
				add = h.RouteReplace
			}
			if err := add(r); err != nil {
				return fmt.Errorf("external host: route %s via %v: %w", vip, gws, err)
			}
		}
		return nil
	})
}

// ---- targets ----

func (l *Lab) startTargetProcess(name, service string) error {
	st := l.state()
	if service == "" {
		service = l.proxyService()
	}
	argv := []string{l.bin("lab"), "target",
		"-name", name,
		"-nsmgr", l.nsmgrURL().String(),
		"-service", service,
		"-port", strconv.Itoa(st.EchoPort),
		"-publish-dir", l.TargetsDir(),
		"-service-port", strconv.Itoa(st.ServicePort),
	}
	argv = append(argv, st.tokenLifetimeArgs()...)
	for _, v := range st.VIPs {
		argv = append(argv, "-vip", netip.MustParsePrefix(v).Addr().String())
	}
	return l.startComponent(name, name, argv, nil)
}

// StopTarget stops the target gracefully: it withdraws its publication and
// closes its NSM connection. Its namespace stays.
func (l *Lab) StopTarget(name string) error {
	if !l.owner {
		return errNotOwner
	}
	if !l.Running(name) {
		return fmt.Errorf("%s is not running", name)
	}
	if !l.stop(name, 30*time.Second) {
		return fmt.Errorf("%s did not stop within 30s (killed)", name)
	}
	return nil
}

// StartTarget (re)starts the target name (a new name is added to the lab,
// with its namespace). It returns once the process runs; the target
// connects in the background (see TargetAddrs).
func (l *Lab) StartTarget(name string) error { return l.StartTargetService(name, "") }

// StartTargetService is StartTarget with the network service the target
// requests (empty: the proxy's, proxy.<conduit>.<trench>.<ns>), e.g. one
// that does not exist.
func (l *Lab) StartTargetService(name, service string) error {
	if !l.owner {
		return errNotOwner
	}
	if err := checkName(name); err != nil {
		return err
	}
	l.mu.Lock()
	if slices.Contains(l.st.LBs, name) {
		l.mu.Unlock()
		return fmt.Errorf("%s is an LB", name)
	}
	if !slices.Contains(l.st.Targets, name) {
		l.st.Targets = append(l.st.Targets, name)
	}
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return err
	}
	if !exists(l.NetNSPath(name)) {
		if err := l.addTargetNetNS(name); err != nil {
			return err
		}
	}
	return l.startTargetProcess(name, service)
}

// ---- helpers ----

func runCmd(name string, args ...string) (string, error) {
	out, err := execCommand(name, args...)
	if err != nil {
		return out, fmt.Errorf("%s %v: %w: %s", name, args, err, out)
	}
	return out, nil
}

// linkPrefixes are the global addresses of the interface ifName in the
// namespace at path.
func linkPrefixes(path, ifName string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	err := netnsdo.WithNetlink(path, func(h *netlink.Handle) error {
		link, err := h.LinkByName(ifName)
		if err != nil {
			return err
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			if !ok || ip.IsLinkLocalUnicast() {
				continue
			}
			ones, _ := a.Mask.Size()
			out = append(out, netip.PrefixFrom(ip.Unmap(), ones))
		}
		return nil
	})
	return out, err
}

// delExtRoutes removes the external host's routes to vip.
func (l *Lab) delExtRoutes(vip netip.Prefix) error {
	return netnsdo.WithNetlink(l.NetNSPath("ext"), func(h *netlink.Handle) error {
		dst := &net.IPNet{IP: vip.Addr().AsSlice(), Mask: net.CIDRMask(vip.Bits(), vip.Addr().BitLen())}
		for h.RouteDel(&netlink.Route{Dst: dst}) == nil {
		}
		return nil
	})
}
