package mtu

import "github.com/networkservicemesh/api/pkg/api/networkservice"

// set overwrites the connection context's MTU when one is configured.
func set(conn *networkservice.Connection, mtu uint32) {
	if mtu == 0 || conn == nil {
		return
	}
	if conn.GetContext() == nil {
		conn.Context = &networkservice.ConnectionContext{}
	}
	conn.GetContext().MTU = mtu
}
