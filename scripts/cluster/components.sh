# The test cluster's components: how each starts, and when it is up (sourced
# by up.sh). Every process runs in a session of its own, logs to
# $CLUSTER_STATE/logs/NAME.log and leaves its pid in $CLUSTER_RUN/NAME.pid,
# by which down.sh stops it.

# run_bg NAME CMD...: starts CMD in the background as component NAME.
run_bg() {
	local name="$1"
	shift
	setsid "$@" >>"$CLUSTER_STATE/logs/$name.log" 2>&1 </dev/null &
	echo $! >"$CLUSTER_RUN/$name.pid"
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
	local cfg="$CLUSTER_STATE/config"
	mkdir -p "$cfg/cni" "$CLUSTER_RUN/containerd"
	cat >"$cfg/cni/10-causeway.conflist" <<EOC
{"cniVersion": "1.0.0", "name": "causeway-cluster", "plugins": [
  {"type": "bridge", "bridge": "$POD_BRIDGE", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$CLUSTER_STATE/cni/ipam"}}]}
EOC
	cat >"$cfg/containerd.toml" <<EOC
version = 2
root = "$CLUSTER_STATE/containerd"
state = "$CLUSTER_RUN/containerd/state"
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]
[grpc]
  address = "$CONTAINERD_SOCK"
[ttrpc]
  address = "$CONTAINERD_SOCK.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CLUSTER_STATE/containerd-opt"
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
      Root = "$CLUSTER_RUN/runc"
EOC
	run_bg containerd containerd --config "$cfg/containerd.toml"
	wait_for containerd 60 ctr --address "$CONTAINERD_SOCK" version
	import_images
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
		--advertise-address "$NODE_IP" --bind-address "$NODE_IP" --secure-port 6443 \
		--etcd-servers "$ETCD_URL" --allow-privileged=true \
		--authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction \
		--client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
		--kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
		--service-account-issuer https://kubernetes.default.svc.cluster.local \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-cluster-ip-range "$SERVICE_CIDR" --profiling=false
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
	local cfg="$CLUSTER_STATE/config"
	echo "# the cluster's pods resolve through its DNS only" >"$cfg/resolv.conf"
	cat >"$cfg/kubelet.yaml" <<EOC
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
containerRuntimeEndpoint: unix://$CONTAINERD_SOCK
address: $NODE_IP
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
tlsCertFile: $PKI/kubelet-server.crt
tlsPrivateKeyFile: $PKI/kubelet-server.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
clusterDNS: [$DNS_SERVICE_IP]
clusterDomain: cluster.local
resolvConf: $cfg/resolv.conf
podLogsDir: $CLUSTER_STATE/pod-logs
failSwapOn: false
evictionHard: {memory.available: 100Mi, nodefs.available: "1%", imagefs.available: "1%", nodefs.inodesFree: "1%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
maxPods: 110
EOC
	run_bg kubelet "$K8S_CACHE/bin/kubelet" --config "$cfg/kubelet.yaml" \
		--kubeconfig "$CLUSTER_STATE/kubeconfig/kubelet.conf" --root-dir "$CLUSTER_STATE/kubelet" \
		--hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
}

start_kube-proxy() {
	local cfg="$CLUSTER_STATE/config"
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
	run_bg kube-proxy "$K8S_CACHE/bin/kube-proxy" --config "$cfg/kube-proxy.yaml"
}

node_ready() {
	[ "$(kubectl get node "$NODE_NAME" -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]
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
	for name in DNS_SERVICE_IP TRUST_DOMAIN SPIRE_CLUSTER NODE_IP VOLUMES; do
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

# local_volumes makes $VOLUMES directories and prints their PersistentVolumes.
local_volumes() {
	local i dir
	for i in $(seq 1 "$VOLUMES"); do
		dir="$CLUSTER_STATE/volumes/pv$i"
		mkdir -p "$dir"
		cat <<EOV
apiVersion: v1
kind: PersistentVolume
metadata: {name: local-pv$i}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: local
  local: {path: $dir}
  nodeAffinity:
    required:
      nodeSelectorTerms:
        - matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [$NODE_NAME]}]
---
EOV
	done
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
