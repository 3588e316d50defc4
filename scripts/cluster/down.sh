#!/usr/bin/env bash
# Stops the test cluster (`make cluster-down`) and leaves the host as it was
# before `up.sh`: its processes and their containers stopped, its mounts,
# links, iptables chains, nftables tables, cgroups and directories removed,
# the host sysctls the kubelet changed put back. Then compares the host with
# the record up.sh took and fails, naming each difference, if they differ.
# Safe to run at any time, also after a failed or partial start.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"
. "$here/host-state.sh"

[ "$(id -u)" = 0 ] || die "the cluster runs as root"
record="$(mktemp)"
trap 'rm -f "$record"' EXIT
if [ -f "$CLUSTER_RUN/host-before" ]; then
	cp "$CLUSTER_RUN/host-before" "$record"
fi

# stop NAME: stops component NAME by its pid file and waits for it.
stop() {
	local pidfile="$CLUSTER_RUN/$1.pid" pid
	[ -f "$pidfile" ] || return 0
	pid="$(cat "$pidfile")"
	if kill -TERM "$pid" 2>/dev/null; then
		for _ in $(seq 1 30); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.5
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
	rm -f "$pidfile"
}

# stop_containers kills every container of the cluster and removes it, so
# that containerd's shims exit and unmount their root file systems.
stop_containers() {
	[ -S "$CONTAINERD_SOCK" ] || return 0
	local c=(ctr --address "$CONTAINERD_SOCK" -n k8s.io) id
	for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
		"${c[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
	for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
		for _ in $(seq 1 20); do
			"${c[@]}" tasks delete "$id" >/dev/null 2>&1 && break
			sleep 0.5
		done
	done
	for id in $("${c[@]}" containers ls -q 2>/dev/null); do
		"${c[@]}" containers delete "$id" >/dev/null 2>&1 || true
	done
}

# stop_shims kills the shims of our containerd that outlived it (found by
# the socket address on their command line).
stop_shims() {
	local p
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/exe" 2>/dev/null)" = /usr/bin/containerd-shim-runc-v2 ] &&
			tr '\0' ' ' <"$p/cmdline" 2>/dev/null | grep -qF -- "-address $CONTAINERD_SOCK "; then
			kill -KILL "${p#/proc/}" 2>/dev/null || true
		fi
	done
}

# unmount_under DIR...: unmounts everything mounted under DIR, deepest first.
unmount_under() {
	local d mp
	for d in "$@"; do
		awk -v d="$d" '$5 == d || index($5, d "/") == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r mp; do
			umount "$mp" 2>/dev/null || umount -l "$mp"
		done
	done
}

# remove_chains removes the iptables chains named KUBE-* and CNI-* and the
# rules that jump to them, in every table of both families.
remove_chains() {
	local t table rule chain
	for t in iptables ip6tables; do
		for table in filter nat mangle raw; do
			"$t" -t "$table" -S 2>/dev/null | awk '$1 == "-A" && / -j (KUBE|CNI)-/ {sub(/^-A/, "-D"); print}' | while read -r rule; do
				eval "$t -t $table $rule" || true
			done
			"$t" -t "$table" -S 2>/dev/null | awk '$1 == "-N" && $2 ~ /^(KUBE|CNI)-/ {print $2}' | while read -r chain; do
				"$t" -t "$table" -F "$chain" && "$t" -t "$table" -X "$chain" || true
			done
		done
	done
}

# remove_new_tables RECORD deletes the iptables-nft tables (ip and ip6
# filter, nat, mangle, raw) that the kubelet created: those absent from the
# record. Their KUBE-* chains are gone by then; what is left are built-in
# chains without rules.
remove_new_tables() {
	local fam name
	nft list tables 2>/dev/null | while read -r _ fam name; do
		case "$fam/$name" in
		ip/filter | ip/nat | ip/mangle | ip/raw | ip6/filter | ip6/nat | ip6/mangle | ip6/raw) ;;
		*) continue ;;
		esac
		if ! grep -qxF "nft table $fam $name" "$1"; then
			nft delete table "$fam" "$name"
		fi
	done
}

# remove_cgroups removes the kubelet's pod cgroups, leaves first.
remove_cgroups() {
	local d
	for d in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods*; do
		[ -d "$d" ] || continue
		find "$d" -depth -type d -exec rmdir {} + 2>/dev/null || true
	done
}

stop kubelet
stop kube-proxy
stop_containers
for c in kube-scheduler kube-controller-manager kube-apiserver containerd etcd; do
	stop "$c"
done
stop_shims
remove_cgroups
unmount_under "$CLUSTER_RUN" "$CLUSTER_STATE" /var/lib/kubelet
for link in "$POD_BRIDGE" "$NODE_LINK"; do
	ip link del "$link" 2>/dev/null || true
done
for fam in ip ip6; do
	nft delete table "$fam" kube-proxy 2>/dev/null || true
done
remove_chains
rm -rf "$CLUSTER_STATE" "$CLUSTER_RUN"
if [ ! -s "$record" ]; then
	log "stopped (no record of the host from a start: nothing to compare)"
	exit 0
fi
restore_sysctls "$record"
remove_new_tables "$record"
for p in "${HOST_PATHS[@]}"; do
	if grep -qxF "path $p absent" "$record"; then
		rm -rf "$p"
	fi
done
if ! diff <(sort "$record") <(host_state | sort) >&2; then
	die "the host differs from its state before the start (above: < before, > now)"
fi
log "stopped; the host is as it was"
