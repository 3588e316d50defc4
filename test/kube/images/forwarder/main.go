// Command forwarder is the test cluster's NSM forwarder: the project's
// forwarder (pkg/forwarder) (neither VPP nor Open vSwitch's kernel module
// exists here), one per node, served on NSM_SOCKET (default
// /var/lib/networkservicemesh/forwarder.sock) and registered with the
// node's NSMgr at NSM_CONNECT_TO. It reaches the clients' and endpoints'
// network namespaces through the file descriptors NSM passes (privileged
// pod). Connections of one node get veth pairs. NSM_TUNNEL_IP (read as
// NSM's forwarders read it: an IP, or a CIDR whose address is taken) lets it
// join namespaces of two nodes with VXLAN on UDP port NSM_VXLAN_PORT
// (default 4789): the tunnels' sockets live in the pod's own network
// namespace, so the address is the pod's, status.podIP, which on the host
// network (as NSM runs its forwarders) is the node's. Unset: one node, veth
// pairs only, as before. With the host's PIDs (hostPID) it closes the
// connections whose client's or endpoint's pod is gone (pkg/forwarder/reaper).
package main

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"strconv"
	"time"

	"github.com/networkservicemesh/api/pkg/api/registry"
	registryrecvfd "github.com/networkservicemesh/sdk/pkg/registry/common/recvfd"

	"github.com/causeway-net/causeway/pkg/forwarder"
	"github.com/causeway-net/causeway/pkg/nsm/registration"
	"github.com/causeway-net/causeway/test/kube/nsmpod"
)

func main() {
	os.Exit(nsmpod.Run("forwarder", func(ctx context.Context, p *nsmpod.Pod) error {
		name := nsmpod.Env("NSM_NAME", "forwarder")
		mgr, err := url.Parse(nsmpod.Env("NSM_CONNECT_TO", "unix:///var/lib/networkservicemesh/nsm.io.sock"))
		if err != nil {
			return fmt.Errorf("NSM_CONNECT_TO: %w", err)
		}
		remote, err := remoteFromEnv()
		if err != nil {
			return err
		}
		dial := p.Creds.NSMDialOptions()
		fwd, err := forwarder.New(ctx, forwarder.Config{
			Name: name, NSMgrURL: mgr, DialOptions: dial, TokenGenerator: p.Creds.TokenGenerator(), Remote: remote,
		})
		if err != nil {
			return err
		}
		p.OnStop(func(context.Context) { fwd.Wait() })
		sock := nsmpod.Env("NSM_SOCKET", "/var/lib/networkservicemesh/forwarder.sock")
		if err := p.Serve("unix", sock, fwd.Register); err != nil {
			return err
		}
		reg := registration.Clients(ctx, mgr, dial, 5*time.Second, registryrecvfd.NewNetworkServiceEndpointRegistryClient())
		k, err := registration.Start(ctx, reg, nil, &registry.NetworkServiceEndpoint{
			Name:                name,
			NetworkServiceNames: []string{forwarder.ServiceName},
			NetworkServiceLabels: map[string]*registry.NetworkServiceLabels{
				forwarder.ServiceName: {Labels: map[string]string{"p2p": "true"}},
			},
			Url: (&url.URL{Scheme: "unix", Path: sock}).String(),
		})
		if err != nil {
			return fmt.Errorf("register: %w", err)
		}
		p.OnStop(func(ctx context.Context) { _ = k.Stop(ctx) })
		return nil
	}))
}

// remoteFromEnv reads NSM_TUNNEL_IP and NSM_VXLAN_PORT.
func remoteFromEnv() (forwarder.Remote, error) {
	raw := nsmpod.Env("NSM_TUNNEL_IP", "")
	if raw == "" {
		return forwarder.Remote{}, nil
	}
	ip := net.ParseIP(raw)
	if ip == nil {
		var err error
		if ip, _, err = net.ParseCIDR(raw); err != nil {
			return forwarder.Remote{}, fmt.Errorf("NSM_TUNNEL_IP %q: neither an IP nor a CIDR", raw)
		}
	}
	port, err := strconv.ParseUint(nsmpod.Env("NSM_VXLAN_PORT", strconv.Itoa(forwarder.DefaultVXLANPort)), 10, 16)
	if err != nil || port == 0 {
		return forwarder.Remote{}, fmt.Errorf("NSM_VXLAN_PORT: not a UDP port")
	}
	return forwarder.Remote{NodeIP: ip, Port: uint16(port)}, nil
}
