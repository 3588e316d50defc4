#!/usr/bin/env bash
# Builds the test cluster's own images (the pod sandbox's pause, CoreDNS,
# SPIRE's server and agent, and the suite's probe of services)
# once, from sources of this clone, into $CAUSEWAY_CACHE/images as
# docker-archive files keyed by a hash of their sources; `up.sh` imports them
# into containerd. Nothing is pulled: each image is FROM scratch with one
# static binary. Prints nothing but its log.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/lib.sh"

# build_image NAME MODDIR PKG USER LINK: NAME's archive, built from the
# command PKG of the module MODDIR, to run as USER (an entry of
# CLUSTER_IMAGES).
build_image() {
	local name="$1" moddir="$2" pkg="$3" user="$4" link="$5"
	local ref archive
	ref="$(image_ref "$name" "$moddir" "$pkg")"
	archive="$(image_archive "$ref")"
	if [ -f "$archive" ]; then
		return
	fi
	mkdir -p "$(dirname "$archive")"
	local tmp
	tmp="$(mktemp -d)"
	# shellcheck disable=SC2064 # expand now: tmp is local
	trap "rm -rf '$tmp'" RETURN
	log "building image $ref"
	case "$link" in
	static) (cd "$moddir" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/$name" "$pkg") ;;
	cgo-static) (cd "$moddir" && CGO_ENABLED=1 go build -trimpath -tags netgo,osusergo \
		-ldflags "-s -w -linkmode external -extldflags -static" -o "$tmp/$name" "$pkg") ;;
	busybox) ;;
	esac
	local b=(buildah --storage-driver vfs --root "$tmp/root" --runroot "$tmp/run")
	local ctr
	ctr="$("${b[@]}" from scratch)"
	if [ "$link" = busybox ]; then
		# The host's static busybox, with the applets the chart's init
		# container runs.
		mkdir -p "$tmp/rootfs/bin"
		cp "$pkg" "$tmp/rootfs/bin/busybox"
		for applet in sh sysctl test echo; do
			ln -s busybox "$tmp/rootfs/bin/$applet"
		done
		"${b[@]}" copy "$ctr" "$tmp/rootfs" / >/dev/null
		"${b[@]}" config --entrypoint '["/bin/sh"]' --user "$user" "$ctr"
	else
		"${b[@]}" copy "$ctr" "$tmp/$name" "/$name" >/dev/null
		"${b[@]}" config --entrypoint "[\"/$name\"]" --user "$user" "$ctr"
	fi
	"${b[@]}" commit --quiet "$ctr" "$ref" >/dev/null
	"${b[@]}" push --quiet "$ref" "docker-archive:$archive.partial:$ref"
	"${b[@]}" rm "$ctr" >/dev/null
	mv "$archive.partial" "$archive"
}

for entry in "${CLUSTER_IMAGES[@]}"; do
	# shellcheck disable=SC2086 # an entry is five words
	build_image $entry
done
