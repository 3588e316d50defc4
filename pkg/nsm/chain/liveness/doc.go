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
//
// A live NSMgr's "down" is first-hand only for an endpoint it serves itself
// (the connection's path: this NSMgr, its forwarder, the endpoint). Across
// nodes the path runs through the other node's NSMgr and forwarder too, and
// when those are replaced this NSMgr reports the connection down while the
// data path (a tunnel the kernel keeps) still forwards; a reselect could
// not be served either before the endpoint has registered through the new
// NSMgr. So for such a connection the caller may say what the data path
// shows (Answering): a far end behind another NSMgr that answers is kept
// and re-requested as it is. For an endpoint of this NSMgr an answer
// proves nothing (a stopped endpoint's interface may still answer) and the
// NSMgr is believed. Across nodes, a far end that stopped is dropped by
// the full mesh when its registration goes, by its silence, or by its
// link; one whose process died while its interface lives and its
// registration stands is kept until that registration expires.
package liveness
