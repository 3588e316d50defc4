#!/usr/bin/env bash
# Run by `make lab`, `make test` and the other root targets before anything
# else. As root: installs the tools of scripts/install-deps.sh when missing,
# loads br_netfilter where it is needed, and refuses `make test` while the
# test cluster runs. `make test` without root runs the tests that need no
# root (the others skip, unless CAUSEWAY_REQUIRE_ROOT is set); the other
# targets need root. Quiet and quick when all is there.
set -euo pipefail
what=${1:-this}
dir=$(dirname "$0")

if [ "$(id -u)" != 0 ]; then
	if [ "$what" = test ] && [ -z "${CAUSEWAY_REQUIRE_ROOT:-}" ]; then
		echo "make test: not root: the tests that need root (kernel, NSM sandbox with veths, lab, end-to-end) skip; run it as root for all of them" >&2
		exit 0
	fi
	echo "make $what: needs root (network namespaces, bridges, rules and nftables); run it as root" >&2
	exit 1
fi

if ! "$dir/install-deps.sh" --check 2>/dev/null; then
	echo "make $what: installing missing prerequisites (scripts/install-deps.sh)"
	"$dir/install-deps.sh"
fi

# The nftables service provider needs bridged packets to pass the inet
# hooks (net.bridge.bridge-nf-call-ip(6)tables): its tests and the lab's
# services need the br_netfilter module.
case $what in
test | lab | figures)
	if [ ! -e /proc/sys/net/bridge/bridge-nf-call-iptables ] && ! modprobe br_netfilter 2>/dev/null; then
		echo "make $what: the br_netfilter kernel module is needed (the nftables service provider's bridged traffic) and 'modprobe br_netfilter' failed: load it on the host (and persist it with 'echo br_netfilter > /etc/modules-load.d/br_netfilter.conf'), or run where it exists" >&2
		exit 1
	fi
	;;
esac

# make test checks that every test leaves the host as it found it (links,
# namespaces, nftables tables, processes); the test cluster's own would
# fail those checks.
if [ "$what" = test ] || [ "$what" = figures ]; then
	run=${CLUSTER_RUN:-/run/causeway-cluster}
	for pidfile in "$run"/*.pid; do
		[ -f "$pidfile" ] || continue
		if kill -0 "$(cat "$pidfile")" 2>/dev/null; then
			echo "make $what: the test cluster is running ($(basename "$pidfile" .pid) and more, from make cluster): its links, namespaces and processes would fail the tests' clean-up checks; stop it first with 'make cluster-down'" >&2
			exit 1
		fi
	done
fi
