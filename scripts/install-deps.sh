#!/usr/bin/env bash
# Installs and checks the system tools that Causeway's build, generators, tests
# and lab run (Debian). This table is the one list of them; it was derived from
# what the code executes (grep for exec.Command, Exec(, and the Makefile).
#
#   scripts/install-deps.sh          install what is missing, then check all
#   scripts/install-deps.sh --check  only check; exit 1 naming what is missing
#   --cluster (with either)          also the test cluster's (`make cluster`)
#
# Each check runs the tool for real (a protoc that cannot find the well-known
# types, or an nft that cannot talk to the kernel, is as bad as none).
set -euo pipefail

# what | Debian package | check command (run with bash -c)
deps=(
	"protoc with the well-known types|protobuf-compiler|check_protoc"
	"google/protobuf/*.proto include files|libprotobuf-dev|test -f /usr/include/google/protobuf/empty.proto"
	"ip (netns, link, route, rule)|iproute2|ip -V && ip netns list"
	"conntrack|conntrack|conntrack --version"
	"nft|nftables|nft --version"
	"ping|iputils-ping|ping -V"
	"sysctl|procps|sysctl -n kernel.ostype"
	"git (version stamp, CI's tree checks, the test cluster's third-party sources where ../shared is absent)|git|git --version"
	"make|make|make --version"
	"gcc (cgo for go test -race)|gcc|gcc --version"
	"buildah (make images, the image test)|buildah|check_buildah"
	"setcap and getcap (the proxy image's file capability)|libcap2-bin|check_setcap"
	"a static shell and tools (make images-full's stand-in builder image)|busybox-static|busybox --list | grep -qx sh && ! ldd /bin/busybox"
	"CA certificates (make images-full's module downloads)|ca-certificates|test -f /etc/ssl/certs/ca-certificates.crt"
	"setpriv (the dataplane's CAP_NET_ADMIN-only test)|util-linux|setpriv --version"
)

# The test cluster's (scripts/cluster): its runtime, its CNI plugins, etcd,
# and the tools its scripts run. Debian's packages start no service here
# (policy-rc.d); the cluster runs them with configurations of its own.
cluster_deps=(
	"etcd|etcd-server|etcd --version"
	"containerd and ctr|containerd|containerd --version && ctr --version"
	"runc|runc|runc --version"
	"CNI bridge, host-local and loopback plugins|containernetworking-plugins|test -x /usr/lib/cni/bridge && test -x /usr/lib/cni/host-local && test -x /usr/lib/cni/loopback"
	"openssl (the cluster's certificates)|openssl|openssl version"
	"curl (etcd's health)|curl|curl --version"
	"iptables and ip6tables (the kubelet's chains)|iptables|iptables-save -V && ip6tables-save -V"
)

check_only=0
for arg in "$@"; do
	case "$arg" in
	--check) check_only=1 ;;
	--cluster) deps+=("${cluster_deps[@]}") ;;
	*) echo "usage: install-deps.sh [--check] [--cluster]" >&2; exit 2 ;;
	esac
done

# Functions the checks may call.
checkfns=(check_protoc check_buildah check_setcap)

# check_protoc compiles a file that imports a well-known type.
check_protoc() {
	local dir
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' RETURN
	printf 'syntax = "proto3";\npackage c;\nimport "google/protobuf/empty.proto";\nmessage M { google.protobuf.Empty e = 1; }\n' >"$dir/c.proto"
	protoc -I "$dir" --descriptor_set_out=/dev/null "$dir/c.proto"
}

# check_buildah makes a working container from scratch in a throw-away vfs
# storage (as root; otherwise only runs buildah).
check_buildah() {
	buildah --version || return
	[ "$(id -u)" = 0 ] || return 0
	local dir
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' RETURN
	buildah --storage-driver vfs --root "$dir/root" --runroot "$dir/run" from scratch
}

# check_setcap sets a file capability and reads it back (as root; otherwise
# only reads one).
check_setcap() {
	local dir
	dir=$(mktemp -d)
	trap 'rm -rf "$dir"' RETURN
	: >"$dir/f"
	if [ "$(id -u)" != 0 ]; then
		getcap "$dir/f" && command -v setcap
		return
	fi
	setcap cap_net_admin=ep "$dir/f" && getcap "$dir/f" | grep -q cap_net_admin
}

missing=() # packages whose check failed, filled by check
check() { # prints one line per missing piece; returns 1 if any
	local bad=0 what pkg cmd
	missing=()
	for d in "${deps[@]}"; do
		IFS='|' read -r what pkg cmd <<<"$d"
		if ! bash -c "$(declare -f "${checkfns[@]}"); $cmd" >/dev/null 2>&1; then
			echo "missing: $what (Debian package $pkg)" >&2
			missing+=("$pkg")
			bad=1
		fi
	done
	if ! command -v go >/dev/null && ! [ -x /usr/local/go/bin/go ]; then
		echo "missing: go (Go 1.26 at /usr/local/go or on PATH)" >&2
		bad=1
	fi
	return $bad
}

if ((check_only)); then
	check
	exit
fi

if check 2>/dev/null; then
	exit 0
fi
# (check has filled missing.)
if [ "$(id -u)" != 0 ]; then
	check || true
	echo "install-deps: installing these needs root (run as root, or install the packages named above)" >&2
	exit 1
fi
# Install what failed its check (dpkg's own state is not enough: a removed
# package whose configuration files remain still counts as known to dpkg).
if ((${#missing[@]})); then
	echo "install-deps: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
check
echo "install-deps: all tools present"
