// Package lab is the root of the building blocks of Causeway's local lab: the
// sub-packages hold the network namespace topology and run state (topo), the
// directory of target addresses (targetaddrs), the load balancer and target
// stubs (lbstub, targetstub), the traffic checks (traffic) and the
// datapath breaker (impair) that cmd/lab
// and the end-to-end tests assemble; labrun assembles them into a lab and
// labtest is the test bed their tests share. The lab's
// NSM control plane is pkg/nsm/controlplane, with the veth forwarder of
// pkg/forwarder. Only cmd/lab, test/e2e and the lab's own packages import
// the lab.
//
// Wiring, in the order cmd/lab brings a lab up:
//
//  1. topo.NewRun(""): run directory /run/causeway-lab/<id>; AddNetNS per
//     role (proxy, lb-a, lb-b, ext, target-N) returns /var/run/netns paths;
//     topo.AddVeth / AddRoute for the external host's links; ApplySysctls
//     with topo.RouterSysctls where traffic is forwarded.
//  2. controlplane.QuietSDKLogs() (never lower logrus below Info: see its doc), then
//     controlplane.Start(ctx, Config{Dir: run.Dir}): NSMgr on <dir>/nsmgr.sock (the
//     proxy's NSM_CONNECT_TO) with the veth forwarder registered.
//  3. LBs as processes: `ip netns exec <lb-ns> lab lb ...` running
//     lbstub.Run with Service <conduit>.<trench>.<ns>, the VIPs,
//     TargetsDir=<dir>/targets and a Route to the external host's address;
//     run.StartProcess(run.NetNSName("lb-a"), "lb-a", argv, env) starts it
//     with its log in <base>/logs/<id> (kept after the teardown) and
//     records it so `down` can kill it.
//  4. ipam, nsp and the proxy as processes (the proxy inside its namespace).
//  5. Targets: targetstub.Run (own process in its namespace) or
//     targetstub.Start in-process with NetNSPath, Service
//     proxy.<conduit>.<trench>.<ns>, Labels {nodeName: ...} if the proxy's
//     service matches on it, the VIPs, an echo Port and PublishDir
//     <dir>/targets.
//  6. Teardown: Stop what runs in-process, then run.Down(grace);
//     `lab down` after a crash: topo.OpenRun(base, id).Down(grace).
package lab
