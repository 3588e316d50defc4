#!/usr/bin/env bash
# Builds the test cluster's Kubernetes commands (kube-apiserver,
# kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl) and
# helm once, into a cache outside the clone keyed by their versions:
#   $CAUSEWAY_CACHE/k8s-<version>/bin, $CAUSEWAY_CACHE/helm-<version>/bin.
# A cache directory appears only when its build has succeeded, so an
# interrupted build starts again. Prints the directory of the binaries.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"

# build_tools MODDIR MODULE OUT LDFLAGS PKG...: builds PKG... of the tools
# module MODDIR into OUT/bin unless OUT exists.
build_tools() {
	local moddir="$1" out="$2" ldflags="$3"
	shift 3
	if [ -d "$out/bin" ]; then
		return
	fi
	local tmp="$out.partial"
	rm -rf "$tmp"
	mkdir -p "$tmp/bin"
	local start=$SECONDS
	log "building $(basename "$out") into $out (cold: tens of minutes on two cores)"
	(cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$tmp/bin/" "$@")
	mv "$tmp" "$out"
	echo "FIGURE: cluster build $(basename "$out") $((SECONDS - start)) s"
}

k8s_ldflags() {
	local v="$K8S_VERSION" minor
	minor="$(echo "$v" | cut -d. -f2)"
	local f=""
	for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
		f+=" -X $pkg.gitVersion=$v -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor -X $pkg.gitTreeState=clean"
	done
	echo "-s -w$f"
}

third_party_link # the tools module replaces NSM's programs by these
build_tools "$CLUSTER_TOOLS" "$K8S_CACHE" "$(k8s_ldflags)" \
	k8s.io/kubernetes/cmd/kube-apiserver \
	k8s.io/kubernetes/cmd/kube-controller-manager \
	k8s.io/kubernetes/cmd/kube-scheduler \
	k8s.io/kubernetes/cmd/kubelet \
	k8s.io/kubernetes/cmd/kube-proxy \
	k8s.io/kubernetes/cmd/kubectl
build_tools "$HELM_TOOLS" "$HELM_CACHE" "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
	helm.sh/helm/v4/cmd/helm
