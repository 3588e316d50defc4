#!/usr/bin/env bash
# Builds Causeway's runtime images through the Dockerfile's whole path, its
# compile stage included, without pulling anything (as root):
#
#   scripts/build-images-full.sh TAG
#
# No image can be pulled here, so the compile stage's base image
# (GO_IMAGE, default the Dockerfile's) is replaced by a local stand-in built
# from what this machine has: the Go toolchain of /usr/local/go, Debian's
# busybox-static as /bin/sh and its tools, setcap with its libraries, and
# the CA certificates (the compile stage downloads the modules from
# GOPROXY, which must be reachable). The stand-in is tagged with the base
# image's name; the compile stage is built once with --pull=never from the
# module root as context (.dockerignore keeps .git and bin/ out) and tagged
# $IMAGE_REPO/compile:TAG, and each runtime image takes its binaries from it.
# The images are tagged $IMAGE_REPO/<binary>:TAG; BUILDAH_ROOT and
# BUILDAH_RUNROOT select a storage as in build-images.sh.
set -euo pipefail

tag=${1:?usage: build-images-full.sh TAG}
repo=${IMAGE_REPO:-localhost/causeway}
top=$(cd "$(dirname "$0")/.." && pwd)
goroot=${GOROOT_STANDIN:-/usr/local/go}
go_image=${GO_IMAGE:-$(sed -n 's/^ARG GO_IMAGE=//p' "$top/Dockerfile")}
binaries=(proxy ipam nsp)

storage=(--storage-driver vfs)
if [ -n "${BUILDAH_ROOT:-}" ]; then
	storage+=(--root "$BUILDAH_ROOT" --runroot "${BUILDAH_RUNROOT:?BUILDAH_RUNROOT goes with BUILDAH_ROOT}")
fi
bh() { buildah "${storage[@]}" "$@"; }

for f in /bin/busybox /usr/sbin/setcap /etc/ssl/certs/ca-certificates.crt "$goroot/bin/go"; do
	if [ ! -e "$f" ]; then
		echo "build-images-full: $f is missing (scripts/install-deps.sh installs busybox-static, libcap2-bin, ca-certificates)" >&2
		exit 1
	fi
done
if ldd /bin/busybox >/dev/null 2>&1; then
	echo "build-images-full: /bin/busybox is not static (Debian's busybox-static)" >&2
	exit 1
fi

# The stand-in: a root file system assembled in a working container.
start=$(date +%s)
ctr=$(bh from --quiet scratch)
trap 'bh rm "$ctr" >/dev/null 2>&1 || true' EXIT
mnt=$(bh mount "$ctr")
mkdir -p "$mnt"/{bin,usr/local,tmp,etc/ssl/certs,go,root}
chmod 1777 "$mnt/tmp"
cp /bin/busybox "$mnt/bin/busybox"
chroot "$mnt" /bin/busybox --install -s /bin
cp -a "$goroot" "$mnt/usr/local/go"
cp /etc/ssl/certs/ca-certificates.crt "$mnt/etc/ssl/certs/"
# setcap and the shared libraries it loads, at their own paths.
mkdir -p "$mnt/usr/sbin"
cp /usr/sbin/setcap "$mnt/usr/sbin/"
for lib in $(ldd /usr/sbin/setcap | grep -o '/[^ ]*'); do
	mkdir -p "$mnt$(dirname "$lib")"
	cp -L "$lib" "$mnt$lib"
done
bh umount "$ctr" >/dev/null
bh config --env PATH=/go/bin:/usr/local/go/bin:/usr/sbin:/bin --env GOPATH=/go --env HOME=/root \
	--env GOTOOLCHAIN=local --workingdir /go "$ctr"
bh commit --quiet --rm "$ctr" "$go_image" >/dev/null
trap - EXIT
echo "build-images-full: stand-in $go_image ($("$goroot/bin/go" version | cut -d' ' -f3)) in $(($(date +%s) - start)) s"

# GOPROXY and GOFLAGS of this machine, as build arguments the compile stage
# declares.
args=(--build-arg "GOPROXY=$("$goroot/bin/go" env GOPROXY)" --build-arg "GOFLAGS=$("$goroot/bin/go" env GOFLAGS)")
bud() { bh bud --quiet --layers --force-rm --isolation chroot --pull=never "$@" -f "$top/Dockerfile" "$top" >/dev/null; }

# The compile stage once, as an image of its own; each runtime stage then
# takes it as BINARIES (a stage or an image: the FROM of "binaries"), so
# the binaries are compiled once for the three images.
start=$(date +%s)
compiled="$repo/compile:$tag"
bud "${args[@]}" --build-arg BINARIES=compile --build-arg "VERSION=$tag" --build-arg "GO_IMAGE=$go_image" \
	--target compile -t "$compiled"
echo "build-images-full: compile stage ($compiled) in $(($(date +%s) - start)) s"
for b in "${binaries[@]}"; do
	start=$(date +%s)
	bud "${args[@]}" --build-arg "BINARIES=$compiled" --target "$b" -t "$repo/$b:$tag"
	echo "build-images-full: $repo/$b:$tag in $(($(date +%s) - start)) s"
done

# The proxy binary as built by the compile stage carries exactly its file
# capability, and every binary runs from its image as the image's user.
for b in "${binaries[@]}"; do
	ctr=$(bh from --quiet --pull=never "$repo/$b:$tag")
	mnt=$(bh mount "$ctr")
	caps=$(getcap "$mnt/usr/local/bin/$b" | sed 's/.* //')
	v=$(chroot --userspec=10005:10005 "$mnt" "/usr/local/bin/$b" -version)
	bh rm "$ctr" >/dev/null
	want=""
	[ "$b" = proxy ] && want=cap_net_admin=ep
	if [ "$caps" != "$want" ] || [ "$v" != "$tag" ]; then
		echo "build-images-full: $b: file capabilities '$caps' (want '$want'), -version '$v' (want '$tag')" >&2
		exit 1
	fi
done
echo "build-images-full: checked: the proxy binary carries exactly cap_net_admin, each binary prints $tag"
