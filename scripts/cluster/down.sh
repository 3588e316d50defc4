#!/usr/bin/env bash
# Stops the test cluster (`make cluster-down`) and leaves the host as it was
# before `up.sh`: every node's processes and containers stopped and with
# them its namespaces (its links, mounts, iptables chains and nftables
# tables go with them), the control plane stopped, the cluster's mounts,
# links, cgroups and directories removed, the host sysctls the kubelet
# changed put back. Then checks that nothing of any node is left (a process
# in its namespaces, its veth, its cgroups) and compares the host with the
# record up.sh took, and fails, naming each difference, if they differ.
# Safe to run at any time, also after a failed or partial start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
. "$here/host-state.sh"
. "$here/stopping.sh"

[ "$(id -u)" = 0 ] || die "the cluster runs as root"
record="$(mktemp)"
trap 'rm -f "$record"' EXIT
if [ -f "$CLUSTER_RUN/host-before" ]; then
	cp "$CLUSTER_RUN/host-before" "$record"
fi

# unmount_under DIR...: unmounts everything mounted under DIR, deepest first.
unmount_under() {
	local d mp
	for d in "$@"; do
		awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r mp; do
			umount "$mp" 2>/dev/null || umount -l "$mp"
		done
	done
}

# kill_node_processes kills every process left in the current node's
# network or mount namespace (its holder last of all: the others first, so
# that none starts anew in them) and waits until none is left.
kill_node_processes() {
	local netns mntns p
	netns="$(cat "$NODE_RUN/netns" 2>/dev/null)" || netns=none
	mntns="$(cat "$NODE_RUN/mntns" 2>/dev/null)" || mntns=none
	for _ in $(seq 1 20); do
		local left=0
		for p in $(node_processes "$netns" "$mntns"); do
			[ "$p" = "$(cat "$NODE_RUN/node.pid" 2>/dev/null)" ] && continue
			kill -KILL "$p" 2>/dev/null || true
			left=1
		done
		[ "$left" = 0 ] && break
		sleep 0.5
	done
	stop "$NODE_RUN/node.pid"
}

# stop_node stops the current node (node_vars): its kubelet and kube-proxy,
# its containers, its containerd and its shims, every process left in its
# namespaces and their holder, so that its namespaces go with everything
# in them; then its veth and its cgroups.
stop_node() {
	stop "$NODE_RUN/kubelet.pid"
	stop "$NODE_RUN/kube-proxy.pid"
	stop_containers
	stop "$NODE_RUN/containerd.pid"
	stop_shims
	kill_node_processes
	ip link del "$NODE_LINK" 2>/dev/null || true
	remove_cgroups "$NODE_NAME"
}

# remove_cgroups NAME...: removes the cgroups NAME of every hierarchy with
# everything under them, leaves first.
remove_cgroups() {
	local d name
	for name in "$@"; do
		for d in /sys/fs/cgroup/*/"$name" /sys/fs/cgroup/"$name"; do
			[ -d "$d" ] || continue
			find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
		done
	done
}

nodes="$(mktemp)"
trap 'rm -f "$record" "$nodes"' EXIT
for i in $(started_nodes); do
	node_vars "$i"
	echo "$i $(cat "$NODE_RUN/netns" 2>/dev/null || echo none) $(cat "$NODE_RUN/mntns" 2>/dev/null || echo none)" >>"$nodes"
	stop_node
done
for c in kube-scheduler kube-controller-manager kube-apiserver etcd; do
	stop "$CLUSTER_RUN/$c.pid"
done
unmount_under "$CLUSTER_RUN" "$CLUSTER_STATE"
ip link del "$CLUSTER_BRIDGE" 2>/dev/null || true
rm -rf "$CLUSTER_STATE" "$CLUSTER_RUN"
if [ ! -s "$record" ]; then
	log "stopped (no record of the host from a start: nothing to compare)"
	exit 0
fi
restore_sysctls "$record"
for p in "${HOST_PATHS[@]}"; do
	if grep -qxF "path $p absent" "$record"; then
		rm -rf "$p"
	fi
done
left="$(node_leftovers <"$nodes")"
if [ -n "$left" ]; then
	echo "$left" >&2
	die "a node left the above behind"
fi
if ! diff <(sort "$record") <(host_state | sort) >&2; then
	die "the host differs from its state before the start (above: < before, > now)"
fi
log "stopped; nothing left of its $(wc -l <"$nodes") node(s); the host is as it was"
