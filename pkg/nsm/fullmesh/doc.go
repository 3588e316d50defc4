// Package fullmesh owns the proxy's full mesh toward the load balancers:
// it watches the registry for every endpoint (NSE) of the load-balancer
// network service and keeps exactly one NSM connection to each, with a
// deterministic id and pinned to that endpoint across heals. A connection is
// closed when its endpoint is unregistered, when its registration expires
// without a refresh, or when the watch reconnects and the endpoint is no
// longer listed; everything is closed when the mesh stops.
package fullmesh
