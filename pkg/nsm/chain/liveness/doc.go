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
// A live NSMgr's "down" says that its stream toward the far end broke,
// not which hop did: it reports down every connection through a forwarder
// it lost (its own forwarder replaced, or, across nodes, the other node's
// NSMgr or forwarder), while the kernel still forwards; a reselect could
// not be served either before the new forwarder has registered. So the
// caller may say what the data path shows (Answering): a far end that
// answers is kept and re-requested as it is, as NSM's own clients do when
// their datapath check passes; a silent one is believed gone. A far end
// whose process stopped while its interface lives is re-requested as it
// is until it serves again, or until its owner drops it: the full mesh,
// when its registration goes (at once when it unregisters, else when the
// registration expires), its link going, or its silence.
package liveness
