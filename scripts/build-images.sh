#!/usr/bin/env bash
# Builds Causeway's runtime images (proxy, ipam, nsp) from the root Dockerfile
# with buildah, offline, from binaries already built (`make build`):
#
#   scripts/build-images.sh BINDIR TAG
#
# The images are tagged $IMAGE_REPO/<binary>:TAG (IMAGE_REPO defaults to
# localhost/causeway). buildah runs with the vfs storage driver and chroot
# isolation, which work as root on any kernel; BUILDAH_ROOT and
# BUILDAH_RUNROOT, when set, select a storage of their own (the image test
# uses a temporary one). The binaries must be static (CGO_ENABLED=0): the
# images are FROM scratch. --layers with --force-rm: buildah 1.28 otherwise
# leaves the working container of the FROM-only "binaries" stage behind;
# the price is a layer cache of unnamed images (`buildah rmi --prune` clears
# it).
set -euo pipefail

bindir=${1:?usage: build-images.sh BINDIR TAG}
tag=${2:?usage: build-images.sh BINDIR TAG}
repo=${IMAGE_REPO:-localhost/causeway}
top=$(cd "$(dirname "$0")/.." && pwd)
binaries=(proxy ipam nsp)
# Binaries that ride in another's image: causeway-upgrade in the proxy's.
extras=(causeway-upgrade)

# The context holds copies, so the capability is not set on bin/ itself (a
# rebuild would drop it silently anyway).
ctx=$(mktemp -d)
trap 'rm -rf "$ctx"' EXIT
mkdir "$ctx/bin"
for b in "${binaries[@]}" "${extras[@]}"; do
	if ! go version -m "$bindir/$b" | grep -q 'build[[:space:]]CGO_ENABLED=0'; then
		echo "build-images: $bindir/$b is not a static build (CGO_ENABLED=0)" >&2
		exit 1
	fi
	cp "$bindir/$b" "$ctx/bin/$b"
done
setcap cap_net_admin=ep "$ctx/bin/proxy"

storage=(--storage-driver vfs)
if [ -n "${BUILDAH_ROOT:-}" ]; then
	storage+=(--root "$BUILDAH_ROOT" --runroot "${BUILDAH_RUNROOT:?BUILDAH_RUNROOT goes with BUILDAH_ROOT}")
fi
for b in "${binaries[@]}"; do
	buildah "${storage[@]}" bud --quiet --layers --force-rm --isolation chroot --pull=never \
		--build-arg BINARIES=prebuilt --target "$b" \
		-t "$repo/$b:$tag" -f "$top/Dockerfile" "$ctx" >/dev/null
	echo "build-images: $repo/$b:$tag"
done
