# How a node's processes stop (sourced by down.sh and node.sh): a pid
# file's process, a node's containers, the shims of its containerd.

# stop PIDFILE: stops the process of the pid file and waits for it.
stop() {
	local pidfile="$1" pid
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
	kill_tasks
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

# kill_tasks kills every task (container process) of the current node's
# containerd, as a power cut would, and leaves the containers: containerd
# and the kubelet find them exited when they start again.
kill_tasks() {
	[ -S "$CONTAINERD_SOCK" ] || return 0
	local c=(ctr --address "$CONTAINERD_SOCK" -n k8s.io) id
	for id in $("${c[@]}" tasks ls -q 2>/dev/null); do
		"${c[@]}" tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true
	done
}

