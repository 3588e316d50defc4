#!/usr/bin/env bash
# Takes one node of the running test cluster away and brings it back, as
# the Kubernetes suite's node scenarios do (root; I is the node's index, 1
# for causeway-node1):
#   node.sh stop I      a power cut: the node's link to the cluster network
#                       goes down (nothing reaches it any more), its kubelet
#                       and kube-proxy stop, every container process is
#                       killed, its containerd and their shims stop; its
#                       namespaces, addresses, routes and state directories
#                       stay, as a machine's configuration and disk do
#   node.sh start I     the boot after it: the link up, containerd, the
#                       kubelet and kube-proxy started again; the kubelet
#                       finds its pods' containers exited and starts them anew
#   node.sh restart I   the kubelet and containerd restarted, the node kept
#                       up: the containers run on (their shims keep them)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
. "$here/components.sh"
. "$here/stopping.sh"

[ "$(id -u)" = 0 ] || die "the cluster runs as root"
[ $# = 2 ] || die "usage: node.sh stop|start|restart I"
action="$1"
node_vars "$2"
[ -d "$NODE_RUN" ] || die "$NODE_NAME is not a node of the running cluster"
CLUSTER_NODES="$(started_nodes | wc -l)"
NODE_RESTARTED=1 # containerd finds its images in its own state (start_containerd)

case "$action" in
stop)
	ip link set "$NODE_LINK" down
	stop "$NODE_RUN/kubelet.pid"
	stop "$NODE_RUN/kube-proxy.pid"
	kill_tasks
	stop "$NODE_RUN/containerd.pid"
	stop_shims
	log "$NODE_NAME stopped"
	;;
start)
	ip link set "$NODE_LINK" up
	for c in "${NODE_COMPONENTS[@]}"; do
		"start_$c"
	done
	log "$NODE_NAME started"
	;;
restart)
	stop "$NODE_RUN/kubelet.pid"
	stop "$NODE_RUN/containerd.pid"
	start_containerd
	start_kubelet
	log "$NODE_NAME's kubelet and containerd restarted"
	;;
*) die "usage: node.sh stop|start|restart I" ;;
esac
