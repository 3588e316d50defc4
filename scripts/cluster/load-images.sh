#!/usr/bin/env bash
# Builds Causeway's images (proxy, ipam, nsp) from this clone, as `make
# images` does, and the suite's image of the lab's LB and target stubs (the
# lab binary, FROM scratch), and loads them into the running test cluster's
# containerd:
#
#   load-images.sh BINDIR TAG     (the binaries of `make build`)
#
# They are tagged localhost/causeway/<binary>:TAG (the chart's default
# repositories) and localhost/causeway/lab:TAG. The buildah storage is a
# throw-away one.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"

bindir="${1:?usage: load-images.sh BINDIR TAG}"
tag="${2:?usage: load-images.sh BINDIR TAG}"
nodes="$(started_nodes)"
[ -n "$nodes" ] || die "no test cluster (make cluster)"

# import ARCHIVE: imports the image archive ARCHIVE on every node.
import() {
	local i
	for i in $nodes; do
		node_vars "$i"
		ctr --address "$CONTAINERD_SOCK" -n k8s.io images import "$1" >/dev/null
	done
}

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
export BUILDAH_ROOT="$tmp/root" BUILDAH_RUNROOT="$tmp/run" IMAGE_REPO=localhost/causeway
"$CLUSTER_REPO/scripts/build-images.sh" "$bindir" "$tag" >/dev/null
for b in proxy ipam nsp; do
	ref="$IMAGE_REPO/$b:$tag"
	buildah --storage-driver vfs --root "$BUILDAH_ROOT" --runroot "$BUILDAH_RUNROOT" \
		push --quiet "$ref" "docker-archive:$tmp/$b.tar:$ref"
	import "$tmp/$b.tar"
	log "loaded $ref"
done
mkdir -p "$tmp/lab/rootfs"
cp "$bindir/lab" "$tmp/lab/rootfs/lab"
scratch_image "$tmp/lab" "$tmp/lab/rootfs" /lab 0:0 "localhost/causeway/lab:$tag" "$tmp/lab.tar"
import "$tmp/lab.tar"
log "loaded localhost/causeway/lab:$tag"
