# Shared settings of the test cluster's scripts (sourced, not run).
# Everything the cluster writes lives under $CLUSTER_STATE; its builds live
# under $CAUSEWAY_CACHE, keyed by version, outside the clone.
export PATH=/usr/local/go/bin:$PATH
CLUSTER_REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CAUSEWAY_CACHE="${CAUSEWAY_CACHE:-/var/cache/causeway}"
CLUSTER_STATE="${CLUSTER_STATE:-/var/lib/causeway-cluster}"
CLUSTER_TOOLS="$CLUSTER_REPO/test/kube/tools/cluster"
HELM_TOOLS="$CLUSTER_REPO/test/kube/tools/helm"

# modversion GOMOD MODULE: the version a tools module requires.
modversion() {
	awk -v m="$2" '$1 == m && $2 ~ /^v/ {print $2; exit} $1 == "require" && $2 == m {print $3; exit}' "$1"
}

K8S_VERSION="$(modversion "$CLUSTER_TOOLS/go.mod" k8s.io/kubernetes)"
HELM_VERSION="$(modversion "$HELM_TOOLS/go.mod" helm.sh/helm/v4)"
K8S_CACHE="$CAUSEWAY_CACHE/k8s-$K8S_VERSION"
HELM_CACHE="$CAUSEWAY_CACHE/helm-$HELM_VERSION"

log() { echo "cluster: $*" >&2; }
die() { log "$*"; exit 1; }

# The cluster's own images: name, module directory, package, user, and how
# the binary is linked: static (CGO_ENABLED=0), cgo-static (cgo, linked
# statically: SPIRE's server needs cgo for its sqlite store), third-party
# (CGO_ENABLED=0, in a copy of a program's released source, with its own
# go.mod, sources.sh; the module directory is third-party:<name>: SPIRE's
# controller manager, whose Kubernetes libraries are newer than the
# cluster's) or busybox (the host's static busybox, Debian's busybox-static,
# for the chart's sysctl init container). NSM's programs build in the
# cluster's tools module, whose go.mod replaces them by their released
# source (sources.sh); SPIRE's server and agent build there with only the
# built-in plugins that the cluster uses (spire-plugins.sh).
KUBE_MOD="$CLUSTER_REPO/test/kube"
CLUSTER_IMAGES=(
	"pause $KUBE_MOD ./images/pause 65535:65535 static"
	"probe $KUBE_MOD ./images/probe 65534:65534 static"
	"coredns $CLUSTER_TOOLS ./coredns 0:0 static"
	"spire-server $CLUSTER_TOOLS github.com/spiffe/spire/cmd/spire-server 0:0 cgo-static"
	"spire-agent $CLUSTER_TOOLS github.com/spiffe/spire/cmd/spire-agent 0:0 static"
	"spire-controller-manager third-party:spire-controller-manager ./cmd 0:0 third-party"
	"cmd-nsmgr $CLUSTER_TOOLS github.com/networkservicemesh/cmd-nsmgr 0:0 static"
	"cmd-registry-k8s $CLUSTER_TOOLS github.com/networkservicemesh/cmd-registry-k8s 65534:65534 static"
	"forwarder $KUBE_MOD ./images/forwarder 0:0 static"
	"busybox $KUBE_MOD /bin/busybox 0:0 busybox"
)

# image_ref NAME MODDIR PKG: the reference of one of the cluster's own
# images, tagged with a hash of the Go version, its module's requirements and
# the Go files of this clone that PKG is built from, by their paths within
# the clone (or PKG itself when it is a file); for a third-party program,
# of the Go version, PKG and every file of its source and of the
# third-party modules it replaces.
image_ref() {
	local hash
	hash="$( (
		go version
		case "$2" in
		third-party:*)
			echo "$3"
			third_party_hash "${2#third-party:}"
			;;
		*)
			if [ "$2" = "$CLUSTER_TOOLS" ]; then
				third_party_link || return 1
			fi
			case "$1" in
			spire-*) echo "$SPIRE_PLUGINS" && declare -f spire_modfile spire_trim ;; # its catalog as built
			esac
			cd "$2" && sha256sum go.mod go.sum 2>/dev/null
			if [ -f "$3" ]; then
				sha256sum "$3"
			else
				# by their paths within the clone: the same in every clone
				go list -deps -f '{{if not .Standard}}{{$d := .Dir}}{{range .GoFiles}}{{$d}}/{{.}}{{"\n"}}{{end}}{{end}}' "$3" |
					sed -n "s#^$CLUSTER_REPO/##p" | LC_ALL=C sort | (cd "$CLUSTER_REPO" && xargs -r sha256sum)
			fi
			;;
		esac
	) | sha256sum | cut -c1-12)" || return 1
	echo "localhost/kube/$1:$hash"
}

# image_named NAME: the reference of the cluster's image NAME.
image_named() {
	local entry name moddir pkg user
	for entry in "${CLUSTER_IMAGES[@]}"; do
		read -r name moddir pkg user <<<"$entry"
		if [ "$name" = "$1" ]; then
			image_ref "$name" "$moddir" "$pkg"
			return
		fi
	done
	die "no image named $1"
}

# image_archive REF: where the image REF is cached.
image_archive() {
	local ref="$1"
	ref="${ref#localhost/kube/}"
	echo "$CAUSEWAY_CACHE/images/${ref/:/-}.tar"
}

# scratch_image WORKDIR ROOTFS ENTRYPOINT USER REF ARCHIVE: the image REF,
# FROM scratch with the directory ROOTFS as its root, its entrypoint and
# user as given, written to the docker-archive ARCHIVE (through a .partial
# file: an archive exists only whole). WORKDIR holds buildah's throw-away
# storage.
scratch_image() {
	local work="$1" rootfs="$2" entrypoint="$3" user="$4" ref="$5" archive="$6"
	local b=(buildah --storage-driver vfs --root "$work/root" --runroot "$work/run")
	local ctr
	ctr="$("${b[@]}" from scratch)"
	"${b[@]}" copy "$ctr" "$rootfs" / >/dev/null
	"${b[@]}" config --entrypoint "[\"$entrypoint\"]" --user "$user" "$ctr"
	"${b[@]}" commit --quiet "$ctr" "$ref" >/dev/null
	"${b[@]}" push --quiet "$ref" "docker-archive:$archive.partial:$ref"
	"${b[@]}" rm "$ctr" >/dev/null
	mv "$archive.partial" "$archive"
}

# The cluster's fixed names and addresses. The control plane (etcd, the
# API server, the controller manager, the scheduler) runs in the host's
# namespaces, the API server on $API_IP of the cluster network: a bridge of
# its own without other ports, so nothing depends on (or leaves by) the
# host's interfaces. Each node is a network and a mount namespace
# (node_vars), joined to that bridge by a veth pair.
CLUSTER_RUN="${CLUSTER_RUN:-/run/causeway-cluster}"
CLUSTER_BRIDGE=cw-br0
CLUSTER_NET_PREFIX=10.255.255
API_IP=$CLUSTER_NET_PREFIX.254
# the pods of node i: 10.244.i.0/24 on the bridge cw-cni0 of its namespace
POD_CIDR=10.244.0.0/16
POD_BRIDGE=cw-cni0
# dual-stack: IPv4 first (the API server's and DNS' Services stay IPv4)
SERVICE_CIDR=10.96.0.0/16,fd10:96::/112
API_SERVICE_IP=10.96.0.1
DNS_SERVICE_IP=10.96.0.10
# CLUSTER_NODES: how many nodes `make cluster` starts (1 to 5)
CLUSTER_NODES="${CLUSTER_NODES:-1}"
NODES_RUN="$CLUSTER_RUN/nodes"
NODES_STATE="$CLUSTER_STATE/nodes"

# node_vars I: sets the variables of node I (1-based): its name, its
# address on the cluster network, its pods' subnet, its directories, its
# containerd's socket and the host's end of its veth pair.
node_vars() {
	NODE_INDEX="$1"
	NODE_NAME="causeway-node$1"
	NODE_IP="$CLUSTER_NET_PREFIX.$1"
	NODE_POD_CIDR="10.244.$1.0/24"
	NODE_STATE="$NODES_STATE/$NODE_NAME"
	NODE_RUN="$NODES_RUN/$NODE_NAME"
	CONTAINERD_SOCK="$NODE_RUN/containerd/containerd.sock"
	NODE_LINK="cw-n$1"
}

# started_nodes prints the indexes of the nodes up.sh started (their run
# directories), one per line.
started_nodes() {
	local d
	for d in "$NODES_RUN"/causeway-node*; do
		[ -d "$d" ] && echo "${d##*/causeway-node}"
	done | sort -n
	true
}

# The paths every node has of its own: in its mount namespace each is a
# bind mount of a directory under $NODE_STATE/root, so hostPath volumes,
# sockets and the kubelet's and containerd's state are per node, as on
# real nodes. The host keeps only empty mount points (HOST_PATHS).
NODE_PATHS=(
	/var/lib/kubelet /var/lib/networkservicemesh /run/spire /var/lib/cni /etc/cni /opt/cni
	/var/log/pods /var/log/containers /run/containerd /var/lib/containerd /opt/containerd /etc/kubernetes
)

# SPIRE as NSM's deployments-k8s ships it (examples/spire/single_cluster):
# its trust domain and the cluster name of its k8s_psat node attestation and
# its controller manager.
TRUST_DOMAIN=k8s.nsm
SPIRE_CLUSTER=k8s-nsm-cluster
VOLUMES=8
ETCD_URL=http://127.0.0.1:2379
KUBECONFIG_ADMIN="$CLUSTER_STATE/kubeconfig/admin.conf"
PKI="$CLUSTER_STATE/pki"

# The host paths the cluster may create (beside its own state, run and
# cache directories): down.sh removes those that did not exist before.
HOST_PATHS=(
	/var/lib/kubelet /var/lib/cni /etc/cni /opt/cni /opt/containerd
	/var/log/pods /var/log/containers /run/containerd /var/lib/containerd
	/etc/kubernetes /var/lib/networkservicemesh /run/spire
	/var/lib/networkservicemesh/nsm.io.sock /var/lib/networkservicemesh/forwarder.sock
)

# The host sysctls the kubelet, kube-proxy and the CNI bridge plugin may
# change: down.sh puts back the values recorded before the start.
HOST_SYSCTLS=(
	vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
	kernel.keys.root_maxkeys kernel.keys.root_maxbytes
	net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet
	net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
	net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
	net.netfilter.nf_conntrack_tcp_timeout_close_wait
)

# The control plane's processes and each node's, started in this order
# (down.sh stops them in reverse).
CONTROL_PLANE=(etcd kube-apiserver kube-controller-manager kube-scheduler)
NODE_COMPONENTS=(containerd kubelet kube-proxy)

kubectl() { "$K8S_CACHE/bin/kubectl" --kubeconfig "$KUBECONFIG_ADMIN" "$@"; }

. "$CLUSTER_REPO/scripts/cluster/sources.sh"
. "$CLUSTER_REPO/scripts/cluster/spire-plugins.sh"
