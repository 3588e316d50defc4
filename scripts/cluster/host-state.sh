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
	for p in /sys/fs/cgroup/*/kubepods* /sys/fs/cgroup/kubepods*; do
		[ -e "$p" ] && echo "cgroup $p"
	done
	for p in /proc/[0-9]*; do
		case "$(readlink "$p/exe" 2>/dev/null)" in
		"$K8S_CACHE"/bin/* | /usr/bin/etcd | /usr/bin/containerd | /usr/bin/containerd-shim-runc-v2 | /usr/sbin/runc)
			echo "process ${p#/proc/} $(readlink "$p/exe")" ;;
		esac
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
