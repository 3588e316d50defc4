package controlplane

import (
	"errors"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"
	"github.com/vishvananda/netlink"

	"github.com/causeway-net/causeway/pkg/nsm/chain/netnsurl"
)

// kernelLinkLost is the lab clients' data-plane fact for the heal check
// (pkg/nsm/chain/liveness): the connection's kernel interface, or its namespace,
// is known to be gone. A check that cannot tell says not lost.
func kernelLinkLost(conn *networkservice.Connection) bool {
	km := kernelmech.ToMechanism(conn.GetMechanism())
	if km == nil || km.GetInterfaceName() == "" {
		return false
	}
	h, err := handleFor(km.GetNetNSURL())
	if err != nil {
		return errors.Is(err, errNetNSGone)
	}
	defer h.Close()
	_, err = h.LinkByName(km.GetInterfaceName())
	var notFound netlink.LinkNotFoundError
	return errors.As(err, &notFound)
}

var errNetNSGone = errors.New("network namespace is gone")

// handleFor opens a netlink handle in the namespace of a kernel
// mechanism's file:// URL (empty: the process's own).
func handleFor(rawURL string) (*netlink.Handle, error) {
	if rawURL == "" {
		return netlink.NewHandle()
	}
	ns, err := netnsurl.Open(rawURL)
	if errors.Is(err, netnsurl.ErrNotFileURL) {
		return nil, err
	}
	if err != nil {
		return nil, errors.Join(errNetNSGone, err)
	}
	defer ns.Close()
	return netlink.NewHandleAt(ns)
}
