#!/usr/bin/env bash
# Starts the test cluster as root (`make cluster`; CLUSTER_NODES nodes, 1 to
# 5): builds or reuses the cached binaries and images, records the host's
# state, starts etcd and the control plane as processes of the host, then
# each node, a network and a mount namespace of its own with its
# containerd, kubelet and kube-proxy, then a default StorageClass, CoreDNS,
# SPIRE with its controller manager and NSM's nsmgr and registry-k8s with
# the project's forwarder, and prints when each is up. A failed start stops
# what it started (down.sh). `make cluster-down` stops it.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
. "$here/host-state.sh"
. "$here/pki.sh"
. "$here/components.sh"

[ "$(id -u)" = 0 ] || die "the cluster runs as root"
# The daemons started below outlive this script: they must not inherit a
# descriptor its caller left open (a lock of `flock ... make cluster` held
# by them would make a `make cluster-down` under the same lock wait for
# ever). All but stdin, stdout, stderr and bash's own copy of the script.
for fd in /proc/$$/fd/*; do
	fd="${fd##*/}"
	if [ "$fd" -gt 2 ] && [ "$fd" != 255 ]; then
		eval "exec $fd>&-"
	fi
done
case "$CLUSTER_NODES" in
[1-5]) ;;
*) die "CLUSTER_NODES=$CLUSTER_NODES: give 1 to 5 nodes" ;;
esac
if [ -e "$CLUSTER_RUN/host-before" ]; then
	die "a cluster is already up (make cluster-down stops it)"
fi

"$CLUSTER_REPO/scripts/install-deps.sh" --cluster
"$here/build-k8s.sh"
"$here/images.sh"

start=$SECONDS
before="$(host_state)"
mkdir -p "$CLUSTER_RUN"
echo "$before" >"$CLUSTER_RUN/host-before"
failed_logs="${TMPDIR:-/tmp}/causeway-cluster-logs"
# keep_logs copies the control plane's logs and each node's to $failed_logs.
keep_logs() {
	rm -rf "$failed_logs"
	cp -r "$CLUSTER_STATE/logs" "$failed_logs"
	local d
	for d in "$NODES_STATE"/*/logs; do
		[ -d "$d" ] && cp -r "$d" "$failed_logs/$(basename "$(dirname "$d")")"
	done
	true
}
trap 'log "start failed: logs kept in $failed_logs; stopping what was started"; keep_logs; "$here/down.sh"' ERR

mkdir -p "$CLUSTER_STATE/logs" "$CLUSTER_STATE/config"
start_cluster_network
make_pki
mkdir -p "$CLUSTER_STATE/bin"
ln -s "$K8S_CACHE/bin/kubectl" "$HELM_CACHE/bin/helm" "$CLUSTER_STATE/bin/"
for c in "${CONTROL_PLANE[@]}"; do
	"start_$c"
done
for i in $(seq 1 "$CLUSTER_NODES"); do
	node_vars "$i"
	start_node
	for c in "${NODE_COMPONENTS[@]}"; do
		"start_$c"
	done
done
wait_for "every node Ready" 300 nodes_ready
start_addons
echo "FIGURE: cluster start to $CLUSTER_NODES nodes Ready $((SECONDS - start)) s"
wait_for "CoreDNS available" 300 available kube-system deployment/coredns
wait_for "the SPIRE server and its controller manager available" 300 available spire statefulset/spire-server
wait_for "the SPIRE agent available" 300 available spire daemonset/spire-agent
# The controller manager's webhook checks the ClusterSPIFFEID: it answers
# once the manager has its certificate in the webhook's configuration.
wait_for "the ClusterSPIFFEID nsm-workloads accepted" 120 apply_manifest spire-workloads
echo "FIGURE: cluster start to CoreDNS and SPIRE available $((SECONDS - start)) s"
apply_manifest nsm
wait_for "NSM's registry-k8s available" 300 available nsm-system deployment/registry-k8s
wait_for "NSM's nsmgr available" 300 available nsm-system daemonset/nsmgr
wait_for "the forwarder available" 300 available nsm-system daemonset/forwarder
echo "FIGURE: cluster start to NSM available $((SECONDS - start)) s"
echo "cluster: up; KUBECONFIG=$KUBECONFIG_ADMIN; kubectl and helm in $CLUSTER_STATE/bin"
