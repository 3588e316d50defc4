# What the test cluster may leave on the host, as sorted text lines (sourced
# by up.sh and down.sh): up.sh records it before the first start, down.sh
# restores what it can and then requires the host to match the record.

# host_state prints one line per fact.
host_state() {
	local k p
	for k in "${HOST_SYSCTLS[@]}"; do
		echo "sysctl $k $(sysctl -n "$k" 2>/dev/null || echo absent)"
	done
	for p in "${HOST_PATHS[@]}" "$CLUSTER_STATE" "$CLUSTER_RUN"; do
		if [ -e "$p" ]; then echo "path $p present"; else echo "path $p absent"; fi
	done
	ip -o link show | awk -F': ' '{sub(/@.*/, "", $2)} $2 ~ /^(cw-|cni|kube)/ {print "link", $2}'
	for t in iptables ip6tables; do
		"$t-save" 2>/dev/null | awk -v t="$t" '/^\*/ {table=substr($1,2)} /^:/ {print t, table, "chain", substr($1,2)} /^-A/ && /(KUBE|CNI)-/ {print t, table, "rule", $0}'
	done
	nft list tables 2>/dev/null | sed 's/^/nft /'
	awk -v re="^($CLUSTER_STATE|$CLUSTER_RUN|/var/lib/kubelet|/run/containerd|/var/lib/containerd|/run/netns/cni-)" \
		'$5 ~ re {print "mount", $5}' /proc/self/mountinfo
	for p in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods* /sys/fs/cgroup/*/causeway-node*; do
		[ -e "$p" ] && echo "cgroup $p"
	done
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in
		"$K8S_CACHE"/bin/* | /usr/bin/etcd | /usr/bin/containerd | /usr/bin/containerd-shim-runc-v2 | /usr/sbin/runc)
			echo "process ${p#/proc/} $(readlink "$p/exe")" ;;
		esac
		case "$(tr '\0' ' ' 2>/dev/null <"$p/cmdline" | cut -c1-13)" in
		causeway-node) echo "process ${p#/proc/} the holder of a node's namespaces" ;;
		esac
	done
	true
}

# node_processes NETNS MNTNS: the pids of the processes in the network
# namespace NETNS or the mount namespace MNTNS (as readlink shows them:
# net:[inode], mnt:[inode]).
node_processes() {
	local p
	for p in /proc/[0-9]*; do
		if [ "$(readlink "$p/ns/net" 2>/dev/null)" = "$1" ] || [ "$(readlink "$p/ns/mnt" 2>/dev/null)" = "$2" ]; then
			echo "${p#/proc/}"
		fi
	done
}

# node_leftovers reads lines "INDEX NETNS MNTNS" of stopped nodes and
# prints what is left of each: a process in its namespaces, a mount that
# holds one of them, its veth on the host, its cgroups. Nothing when all
# is gone.
node_leftovers() {
	local i netns mntns p
	while read -r i netns mntns; do
		node_vars "$i"
		for p in $(node_processes "$netns" "$mntns"); do
			echo "node $NODE_NAME: process $p ($(tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null)) in its namespaces"
		done
		awk -v n="$netns" -v m="$mntns" '$0 ~ / nsfs / && (index($0, n) || index($0, m)) {print "node '"$NODE_NAME"': mount", $5, "holds its namespace"}' /proc/self/mountinfo
		ip link show "$NODE_LINK" >/dev/null 2>&1 && echo "node $NODE_NAME: link $NODE_LINK"
		for p in /sys/fs/cgroup/*/"$NODE_NAME"; do
			[ -e "$p" ] && echo "node $NODE_NAME: cgroup $p"
		done
	done
	true
}

# restore_sysctls RECORD: sets every recorded sysctl back to its value.
restore_sysctls() {
	local k v
	awk '$1 == "sysctl" && $3 != "absent" {print $2, $3}' "$1" | while read -r k v; do
		if [ "$(sysctl -n "$k" 2>/dev/null)" != "$v" ]; then
			sysctl -qw "$k=$v"
		fi
	done
}
