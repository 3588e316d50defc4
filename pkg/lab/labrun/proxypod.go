package labrun

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/causeway-net/causeway/pkg/lab/topo"
)

// ReplaceProxyPod replaces the proxy as Kubernetes replaces a deleted pod
// of its DaemonSet: the proxy is stopped (SIGTERM, then SIGKILL after
// grace), its namespace is deleted, and a proxy under a new pod name is
// started in a new namespace of the same name, with a new link to the
// ctl namespace. The old namespace lives on while a file descriptor holds
// it (the NSM control plane's, as a dead pod's does on a node); the
// forwarder's reaper judges it by its mount and processes, as a node's
// forwarder judges a pod's.
func (l *Lab) ReplaceProxyPod(grace time.Duration) error {
	if !l.owner {
		return errNotOwner
	}
	if l.Running("proxy") {
		if err := l.StopComponent("proxy", grace); err != nil {
			return err
		}
	}
	// The ctl end of the old pod's link: deleting it deletes the pair,
	// whatever holds the old namespace.
	if _, err := l.Exec("ctl", "ip", "link", "del", ctlIf); err != nil {
		return fmt.Errorf("replace the proxy's pod: %w", err)
	}
	name := l.NetNS("proxy")
	if _, err := runCmd("ip", "netns", "del", name); err != nil {
		return fmt.Errorf("replace the proxy's pod: %w", err)
	}
	if _, err := runCmd("ip", "netns", "add", name); err != nil {
		return fmt.Errorf("replace the proxy's pod: %w", err)
	}
	if _, err := runCmd("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		return fmt.Errorf("replace the proxy's pod: %w", err)
	}
	if err := topo.AddVeth(
		topo.VethEnd{NetNSPath: l.NetNSPath("ctl"), Name: ctlIf, Addrs: []netip.Prefix{ctlAddr}},
		topo.VethEnd{NetNSPath: l.NetNSPath("proxy"), Name: proxyIf, Addrs: []netip.Prefix{proxyAddr}}); err != nil {
		return fmt.Errorf("replace the proxy's pod: %w", err)
	}
	l.mu.Lock()
	l.st.ProxyPod++
	l.mu.Unlock()
	if err := l.save(); err != nil {
		return err
	}
	l.log.Info("proxy pod replaced", "pod", l.podName("proxy"))
	return l.StartProxy()
}
