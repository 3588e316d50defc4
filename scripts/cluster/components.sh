# The test cluster's components: how each starts, and when it is up (sourced
# by up.sh). Every process runs in a session of its own. The control plane's
# log to $CLUSTER_STATE/logs/NAME.log and leave their pids in
# $CLUSTER_RUN/NAME.pid; a node's (in the node's namespaces, node_vars) to
# $NODE_STATE/logs/NAME.log and $NODE_RUN/NAME.pid, by which down.sh stops
# them.

# run_bg NAME CMD...: starts CMD in the background as the control plane's
# component NAME.
run_bg() {
	local name="$1"
	shift
	setsid "$@" >>"$CLUSTER_STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$CLUSTER_RUN/$name.pid"
}

# run_node_bg NAME CMD...: starts CMD in the background in the current
# node's network and mount namespaces, as its component NAME.
run_node_bg() {
	local name="$1"
	shift
	setsid nsenter --target "$(cat "$NODE_RUN/node.pid")" --net --mount -- "$@" \
		>>"$NODE_STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$NODE_RUN/$name.pid"
}

# in_node CMD...: runs CMD in the current node's namespaces.
in_node() {
	nsenter --target "$(cat "$NODE_RUN/node.pid")" --net --mount -- "$@"
}

# start_cluster_network makes the cluster network: the bridge with the
# control plane's address (start_node adds each node's port and the route
# to its pods).
start_cluster_network() {
	ip link add "$CLUSTER_BRIDGE" type bridge
	ip addr add "$API_IP/24" dev "$CLUSTER_BRIDGE"
	ip link set "$CLUSTER_BRIDGE" up
}

# start_node makes the current node: a process that holds its network and
# mount namespaces (argv[0] its name: host-state.sh finds it by that), a
# veth pair from the cluster's bridge to its eth0 with its address, routes
# to the other nodes' pods and a default route via the host, its own
# directories bound over NODE_PATHS, and its cgroup (the kubelet's
# cgroupRoot, in every hierarchy).
start_node() {
	mkdir -p "$NODE_RUN" "$NODE_STATE/logs" "$NODE_STATE/config"
	local p
	for p in "${NODE_PATHS[@]}"; do
		mkdir -p "$p" "$NODE_STATE/root$p"
	done
	setsid unshare --net --mount --propagation slave -- bash -c "exec -a $NODE_NAME sleep infinity" </dev/null >/dev/null 2>&1 &
	echo $! >"$NODE_RUN/node.pid"
	wait_for "$NODE_NAME's namespaces" 10 node_unshared
	readlink "/proc/$(cat "$NODE_RUN/node.pid")/ns/net" >"$NODE_RUN/netns"
	readlink "/proc/$(cat "$NODE_RUN/node.pid")/ns/mnt" >"$NODE_RUN/mntns"
	for p in "${NODE_PATHS[@]}"; do
		in_node mount --bind "$NODE_STATE/root$p" "$p"
	done
	ip link add "$NODE_LINK" type veth peer name eth0 netns "/proc/$(cat "$NODE_RUN/node.pid")/ns/net"
	ip link set "$NODE_LINK" master "$CLUSTER_BRIDGE" up
	in_node ip link set lo up
	in_node ip addr add "$NODE_IP/24" dev eth0
	in_node ip link set eth0 up
	in_node ip route add default via "$API_IP"
	local j
	for j in $(seq 1 "$CLUSTER_NODES"); do
		if [ "$j" != "$NODE_INDEX" ]; then
			in_node ip route add "10.244.$j.0/24" via "$CLUSTER_NET_PREFIX.$j"
		fi
	done
	ip route add "$NODE_POD_CIDR" via "$NODE_IP" dev "$CLUSTER_BRIDGE"
	local h
	for h in /sys/fs/cgroup/*/; do
		mkdir -p "$h$NODE_NAME"
		if [ -f "$h/cpuset.cpus" ]; then
			cat "$h/cpuset.cpus" >"$h$NODE_NAME/cpuset.cpus"
			cat "$h/cpuset.mems" >"$h$NODE_NAME/cpuset.mems"
		fi
		# the weight the kubelet gives its kubepods (1024 a CPU), which a
		# kubepods at the root of the hierarchy had against the host's
		# other processes: the default 1024 would halve it on two cores
		if [ -f "$h/cpu.shares" ]; then
			echo $(($(nproc) * 1024)) >"$h$NODE_NAME/cpu.shares"
		fi
	done
}

# node_unshared: whether the current node's holder runs in namespaces of
# its own.
node_unshared() {
	[ "$(readlink "/proc/$(cat "$NODE_RUN/node.pid")/ns/net")" != "$(readlink /proc/self/ns/net)" ] &&
		[ "$(readlink "/proc/$(cat "$NODE_RUN/node.pid")/ns/mnt")" != "$(readlink /proc/self/ns/mnt)" ]
}

# wait_for WHAT SECONDS CHECK...: runs CHECK until it succeeds; fails after
# SECONDS (a deadline for a broken start, not a promise of speed).
wait_for() {
	local what="$1" deadline=$((SECONDS + $2))
	shift 2
	until "$@" >/dev/null 2>&1; do
		if ((SECONDS > deadline)); then
			log "gave up waiting for $what"
			return 1
		fi
		sleep 1
	done
}

alive() { kill -0 "$(cat "$CLUSTER_RUN/$1.pid")" 2>/dev/null; }

start_etcd() {
	run_bg etcd etcd --name "$NODE_NAME" --data-dir "$CLUSTER_STATE/etcd" \
		--listen-client-urls "$ETCD_URL" --advertise-client-urls "$ETCD_URL" \
		--listen-peer-urls http://127.0.0.1:2380 --initial-advertise-peer-urls http://127.0.0.1:2380 \
		--initial-cluster "$NODE_NAME=http://127.0.0.1:2380" --listen-metrics-urls "" \
		--quota-backend-bytes 2147483648
	wait_for etcd 60 curl -sf "$ETCD_URL/health"
}

start_containerd() {
	local cfg="$NODE_STATE/config"
	mkdir -p "$cfg/cni" "$NODE_RUN/containerd"
	cat >"$cfg/cni/10-causeway.conflist" <<EOC
{"cniVersion": "1.0.0", "name": "causeway-cluster", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$NODE_POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$NODE_STATE/cni/ipam"}}]}
EOC
	cat >"$cfg/containerd.toml" <<EOC
version = 2
root = "$NODE_STATE/containerd"
state = "$NODE_RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$NODE_STATE/containerd-opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(image_named pause)"
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$cfg/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
      SystemdCgroup = false
      Root = "$NODE_RUN/runc"
EOC
	run_node_bg containerd containerd --config "$cfg/containerd.toml"
	wait_for containerd 60 ctr --address "$CONTAINERD_SOCK" version
	# A node started again (node.sh) has its images on its disk already.
	[ -n "${NODE_RESTARTED:-}" ] || import_images
}

# import_images loads the cluster's cached images into containerd's
# Kubernetes namespace.
import_images() {
	local entry name
	for entry in "${CLUSTER_IMAGES[@]}"; do
		read -r name _ <<<"$entry"
		ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$(image_archive "$(image_named "$name")")" >/dev/null
	done
}

start_kube-apiserver() {
	run_bg kube-apiserver "$K8S_CACHE/bin/kube-apiserver" \
		--advertise-address "$API_IP" --bind-address "$API_IP" --secure-port 6443 \
		--etcd-servers "$ETCD_URL" --allow-privileged=true \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --enable-aggregator-routing=true --profiling=false
	wait_for kube-apiserver 300 kubectl get --raw /readyz
}

start_kube-controller-manager() {
	local kc="$CLUSTER_STATE/kubeconfig/kube-controller-manager.conf"
	run_bg kube-controller-manager "$K8S_CACHE/bin/kube-controller-manager" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address 127.0.0.1 --leader-elect=false --use-service-account-credentials=true \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --controllers '*,-cloud-node-lifecycle,-service-lb-controller,-node-route-controller' \
		--profiling=false
}

start_kube-scheduler() {
	local kc="$CLUSTER_STATE/kubeconfig/kube-scheduler.conf"
	run_bg kube-scheduler "$K8S_CACHE/bin/kube-scheduler" \
		--kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--bind-address 127.0.0.1 --leader-elect=false --profiling=false
}

start_kubelet() {
	local cfg="$NODE_STATE/config"
	echo "# the cluster's pods resolve through its DNS only" >"$cfg/resolv.conf"
	cat >"$cfg/kubelet.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /$NODE_NAME
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $PKI/kubelet-server-$NODE_NAME.crt
tlsPrivateKeyFile: $PKI/kubelet-server-$NODE_NAME.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: $cfg/resolv.conf
podLogsDir: /var/log/pods
failSwapOn: false
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
EOC
	run_node_bg kubelet "$K8S_CACHE/bin/kubelet" --config "$cfg/kubelet.yaml" \
		--kubeconfig "$CLUSTER_STATE/kubeconfig/kubelet-$NODE_NAME.conf" --root-dir /var/lib/kubelet \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
}

start_kube-proxy() {
	local cfg="$NODE_STATE/config"
	cat >"$cfg/kube-proxy.yaml" <<EOC
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: $CLUSTER_STATE/kubeconfig/kube-proxy.conf}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [$NODE_IP/32]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
EOC
	run_node_bg kube-proxy "$K8S_CACHE/bin/kube-proxy" --config "$cfg/kube-proxy.yaml"
}

# nodes_ready: whether every node is Ready.
nodes_ready() {
	local i
	for i in $(seq 1 "$CLUSTER_NODES"); do
		[ "$(kubectl get node "causeway-node$i" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ] || return 1
	done
}

# apply_manifest NAME: applies manifests/NAME.yaml with its @...@ values
# filled in: @IMAGE:<name>@ the cluster's image <name>, the others from the
# variables of lib.sh.
apply_manifest() {
	local sedargs=() entry name
	for entry in "${CLUSTER_IMAGES[@]}"; do
		read -r name _ <<<"$entry"
		if grep -q "@IMAGE:$name@" "$here/manifests/$1.yaml"; then
			sedargs+=(-e "s#@IMAGE:$name@#$(image_named "$name")#g")
		fi
	done
	for name in DNS_SERVICE_IP TRUST_DOMAIN SPIRE_CLUSTER VOLUMES; do
		sedargs+=(-e "s#@$name@#${!name}#g")
	done
	local doc
	doc="$(sed "${sedargs[@]}" "$here/manifests/$1.yaml")"
	if grep -n '@[A-Z_:a-z-]*@' <<<"$doc" >&2; then
		die "manifests/$1.yaml: a value above is not filled in"
	fi
	kubectl apply -f - <<<"$doc" >/dev/null
}

# start_addons applies the default StorageClass and its volumes, CoreDNS,
# and SPIRE with the custom resources of its controller manager (from the
# controller manager's source: sources.sh).
start_addons() {
	apply_manifest storage
	local_volumes | kubectl apply -f - >/dev/null
	apply_manifest coredns
	kubectl apply --server-side -f "$(third_party_dir spire-controller-manager)/config/crd/bases" >/dev/null
	apply_manifest spire
}

# local_volumes makes $VOLUMES directories on every node and prints their
# PersistentVolumes (local-pvK on the first node, local-N-pvK on node N).
local_volumes() {
	local n i dir name
	for n in $(seq 1 "$CLUSTER_NODES"); do
		node_vars "$n"
		for i in $(seq 1 "$VOLUMES"); do
			dir="$NODE_STATE/volumes/pv$i"
			name="local-pv$i"
			[ "$n" = 1 ] || name="local-$n-pv$i"
			mkdir -p "$dir"
			local_volume "$name" "$dir"
		done
	done
}

# local_volume NAME DIR: the PersistentVolume NAME of the current node's
# directory DIR.
local_volume() {
	cat <<EOV
apiVersion: v1
kind: PersistentVolume
metadata: {name: $1}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  local: {path: $2}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}]
---
EOV
}

# available NAMESPACE KIND/NAME: whether the Deployment, StatefulSet or
# DaemonSet has all its pods ready.
available() {
	local want have
	case "$2" in
	deployment/*) want=.spec.replicas have=.status.availableReplicas ;;
	statefulset/*) want=.spec.replicas have=.status.availableReplicas ;;
	daemonset/*) want=.status.desiredNumberScheduled have=.status.numberAvailable ;;
	esac
	local got
	got="$(kubectl -n "$1" get "$2" -o jsonpath="{$want} {$have}")"
	[ "${got% *}" = "${got#* }" ] && [ "${got% *}" != 0 ]
}
