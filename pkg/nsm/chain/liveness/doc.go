// Package liveness decides, for the SDK's heal client, whether a connection
// whose NSM control plane reported it down still has a working data path.
// The SDK reselects (closes the connection, tearing its data path down, and
// requests anew) when it has no such check. That is right when the NSMgr
// says the far end died, and wrong when the NSMgr itself went away (an NSM
// upgrade restarts it on every node): the veths, ports and routes still
// forward, and closing them turns a control-plane outage into a data-plane
// one. The check tells the two apart by asking the NSMgr's MonitorConnection
// service about the state of the connection: an NSMgr that answers a new request is up
// and its report is believed; if it does not answer, the connection is
// alive unless its kernel link is known to be gone, and heal re-requests it
// as it is until the NSMgr is back.
//
// A restarted NSMgr answers, but knows no connection: it keeps them in
// memory. Its "unknown" says nothing about the far end, and believing it
// would tear down every data path once the control plane is back, at the
// first re-request it cannot serve yet (its registry or forwarder still
// coming up). So NSMgr tells the NSMgr's runs apart (one per transport of
// its gRPC connection, which never idles) and records the run each
// connection was last established through (NewClient, in the connection's
// chain); "unknown" is believed only from that run. A connection that is
// really gone is then dropped by its owner (the full mesh, when the load
// balancer's registration goes) or by its link going.
package liveness
