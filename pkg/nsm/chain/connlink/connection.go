package connlink

import (
	"fmt"

	"github.com/networkservicemesh/api/pkg/api/networkservice"
	kernelmech "github.com/networkservicemesh/api/pkg/api/networkservice/mechanisms/kernel"

	"github.com/causeway-net/causeway/pkg/proxy"
)

// interfaceOf describes the proxy-side interface of an established
// connection: its key and the kernel mechanism's interface name.
func interfaceOf(conn *networkservice.Connection, t proxy.ConnType) (proxy.Interface, error) {
	key, err := proxy.ConnKey(conn, t)
	if err != nil {
		return proxy.Interface{}, err
	}
	mech := kernelmech.ToMechanism(conn.GetMechanism())
	if mech == nil {
		return proxy.Interface{}, fmt.Errorf("connection %s has no kernel mechanism", key)
	}
	name := mech.GetInterfaceName()
	if name == "" {
		return proxy.Interface{}, fmt.Errorf("connection %s has no interface name", key)
	}
	return proxy.Interface{Name: name, Type: t, ConnKey: key}, nil
}
