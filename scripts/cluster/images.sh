#!/usr/bin/env bash
# Builds the test cluster's own images (the pod sandbox's pause, CoreDNS,
# SPIRE's server, agent and controller manager, NSM's nsmgr and registry-k8s,
# the project's veth forwarder, and the suite's probe of services) once,
# from sources of this clone and the released sources of sources.sh, into
# $CAUSEWAY_CACHE/images as docker-archive files keyed by a hash of their
# sources (the archives of other versions are removed); `up.sh` imports them into containerd. Nothing
# is pulled: each image is FROM scratch with one static binary. Prints
# nothing but its log.
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
	local flags=(-trimpath) modfile
	case "$name" in
	spire-*)
		modfile="$(spire_modfile "$tmp/spire")" || return 1
		flags+=(-modfile "$modfile")
		;;
	esac
	case "$link" in
	static) (cd "$moddir" && CGO_ENABLED=0 go build "${flags[@]}" -ldflags "-s -w" -o "$tmp/$name" "$pkg") ;;
	cgo-static) (cd "$moddir" && CGO_ENABLED=1 go build "${flags[@]}" -tags netgo,osusergo \
		-ldflags "-s -w -linkmode external -extldflags -static" -o "$tmp/$name" "$pkg") ;;
	third-party) third_party_build "${moddir#third-party:}" "$pkg" "$tmp" "$tmp/$name" ;;
	busybox) ;;
	esac
	mkdir -p "$tmp/rootfs"
	if [ "$link" = busybox ]; then
		# The host's static busybox, with the applets the chart's init
		# container runs.
		mkdir -p "$tmp/rootfs/bin"
		cp "$pkg" "$tmp/rootfs/bin/busybox"
		for applet in sh sysctl test echo; do
			ln -s busybox "$tmp/rootfs/bin/$applet"
		done
		scratch_image "$tmp" "$tmp/rootfs" /bin/sh "$user" "$ref" "$archive"
	else
		mv "$tmp/$name" "$tmp/rootfs/$name"
		scratch_image "$tmp" "$tmp/rootfs" "/$name" "$user" "$ref" "$archive"
	fi
}

# prune NAME MODDIR PKG ...: removes the cached archives of NAME other
# than the one of its current sources (older versions, and partial writes
# of a build that was interrupted).
prune() {
	local name="$1" keep f
	keep="$(image_archive "$(image_ref "$1" "$2" "$3")")"
	for f in "$CAUSEWAY_CACHE/images/$name"-*.tar "$CAUSEWAY_CACHE/images/$name"-*.tar.partial; do
		if [[ "$(basename "$f")" =~ ^$name-[0-9a-f]{12}\.tar(\.partial)?$ ]] && [ "$f" != "$keep" ]; then
			log "pruning $(basename "$f")"
			rm -f "$f"
		fi
	done
}

# images.sh [NAME...]: only the images named (default: all).
for entry in "${CLUSTER_IMAGES[@]}"; do
	if [ $# -gt 0 ] && [[ " $* " != *" ${entry%% *} "* ]]; then
		continue
	fi
	# shellcheck disable=SC2086 # an entry is five words
	build_image $entry
	# shellcheck disable=SC2086
	prune $entry
done
